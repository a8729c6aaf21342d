"""AWS's own timer: an EventBridge Scheduler one-time schedule that stops the instance at a
time, with no box and no watcher needed. runspec arms it when a run starts on EC2, at the
deadline plus the overrun plus a margin: if the run's own finish and every watcher failed, AWS
stops the instance itself (a stop, never a terminate: the disk keeps what was not verified).

Scheduler API (docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html):
  POST https://scheduler.REGION.amazonaws.com/schedules/NAME, SigV4 service "scheduler", JSON:
  {"ScheduleExpression": "at(2026-12-01T20:00:00)", "ScheduleExpressionTimezone": "UTC",
   "FlexibleTimeWindow": {"Mode": "OFF"}, "ActionAfterCompletion": "DELETE",
   "Target": {"Arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances", "RoleArn": ROLE,
              "Input": "{\\"InstanceIds\\": [ID]}"}}
The schedule runs as `RUNSPEC_AWS_SCHEDULER_ROLE` (an IAM role EventBridge Scheduler may assume,
allowed ec2:StopInstances); the box's credentials need scheduler:CreateSchedule and iam:PassRole.
A schedule of that name that exists already (HTTP 409: armed before a restart) counts as armed.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from runspec.clock import utc_iso
from runspec.providers.aws import AWS, sign
from runspec.providers.base import ProviderError

MARGIN_S = 600.0  # after the deadline plus overrun: the box's own finish goes first
ROLE_ENV = "RUNSPEC_AWS_SCHEDULER_ROLE"
TARGET = "arn:aws:scheduler:::aws-sdk:ec2:stopInstances"


def schedule_name(run: str, instance: str) -> str:
    return f"runspec-{run}-{instance}"[:64]


def _signed(aws: AWS, method: str, url: str, body: bytes) -> dict[str, str]:
    return sign(
        method=method,
        url=url,
        headers={"content-type": "application/json"},
        payload=body,
        creds=aws.credentials(),
        region=aws.region(),
        service="scheduler",
        now=dt.datetime.fromtimestamp(aws.clock.time(), tz=dt.timezone.utc),
    )


def _url(aws: AWS, name: str) -> str:
    base = aws.env.get("RUNSPEC_AWS_SCHEDULER_API") or (
        f"https://scheduler.{aws.region()}.amazonaws.com"
    )
    return f"{base.rstrip('/')}/schedules/{name}"


def disarm_timer(aws: AWS, name: str) -> None:
    """Delete the schedule once the run reached its end (a kept box is the user's choice);
    a schedule already gone (404) is disarmed. Raises ProviderError otherwise."""
    url = _url(aws, name)
    aws.http.request("DELETE", url, headers=_signed(aws, "DELETE", url, b""), ok=(200, 204, 404))


def arm_stop_timer(aws: AWS, run: str, instance: str, at: float) -> dict[str, Any]:
    """Arm the one-time stop at `at` (UTC seconds); what the lease and status show of it.
    Raises ProviderError when it cannot (no role configured, a refusal)."""
    role = aws.env.get(ROLE_ENV)
    if not role:
        raise ProviderError(f"aws: no {ROLE_ENV}: the EventBridge Scheduler timer is not armed")
    name = schedule_name(run, instance)
    url = _url(aws, name)
    when = dt.datetime.fromtimestamp(at, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    body = json.dumps(
        {
            "ScheduleExpression": f"at({when})",
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "Description": f"runspec: stop {instance} if run {run} is still up",
            "Target": {
                "Arn": TARGET,
                "RoleArn": role,
                "Input": json.dumps({"InstanceIds": [instance]}),
            },
        }
    ).encode()
    headers = _signed(aws, "POST", url, body)
    response = aws.http.request("POST", url, headers=headers, body=body, ok=(200, 409))
    return {
        "provider": "aws",
        "kind": "eventbridge-scheduler",
        "name": name,
        "action": "stop",
        "at": utc_iso(at),
        "already": response.status == 409,
    }
