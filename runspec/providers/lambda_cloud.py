"""Lambda Cloud: the instance id comes from the daemon's configuration or environment
(`RUNSPEC_LAMBDA_INSTANCE_ID`, or `LAMBDA_INSTANCE_ID`), the key from `LAMBDA_API_KEY`. Lambda's
instances have no metadata server that names them, and no stop: only terminate.

REST API (docs.lambda.ai/api/cloud, base https://cloud.lambdalabs.com/api/v1, Bearer key):
  destroy: POST /instance-operations/terminate  {"instance_ids": [id]}
  state:   GET  /instances/{id}  -> {"data": {"status": "active" | "terminating" | "terminated"}}
"""

from __future__ import annotations

from typing import ClassVar

from runspec.providers.base import GONE, Action, Provider, ProviderError


class LambdaCloud(Provider):
    name = "lambda"
    can_stop = False
    stop_bills = "Lambda instances cannot be stopped, only terminated"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.DESTROY: frozenset({"terminating", "terminated"}),
    }
    secret_env = ("LAMBDA_API_KEY",)

    @property
    def api(self) -> str:
        return self.env.get("RUNSPEC_LAMBDA_API", "https://cloud.lambdalabs.com/api/v1").rstrip("/")

    def identify(self) -> str:
        instance = self.env.get("RUNSPEC_LAMBDA_INSTANCE_ID") or self.env.get("LAMBDA_INSTANCE_ID")
        if not instance:
            raise ProviderError(
                "lambda: no instance id; set RUNSPEC_LAMBDA_INSTANCE_ID in /etc/runspec/env "
                "(Lambda has no metadata server that names the instance)"
            )
        return instance

    def how_identified(self) -> str:
        return "RUNSPEC_LAMBDA_INSTANCE_ID"

    def _headers(self) -> dict[str, str]:
        key = self.env.get("LAMBDA_API_KEY")
        if not key:
            raise ProviderError("lambda: LAMBDA_API_KEY is not set")
        return {"Authorization": f"Bearer {key}"}

    def describe_call(self, action: Action, instance: str) -> str:
        return f'POST {self.api}/instance-operations/terminate {{"instance_ids": ["{instance}"]}}'

    def call(self, action: Action, instance: str) -> None:
        self.http.request(
            "POST",
            f"{self.api}/instance-operations/terminate",
            headers=self._headers(),
            json_body={"instance_ids": [instance]},
        )

    def state(self, instance: str) -> str:
        resp = self.http.request(
            "GET", f"{self.api}/instances/{instance}", headers=self._headers(), ok=(200, 404)
        )
        if resp.status == 404:
            return GONE
        data = resp.json()
        info = data.get("data") if isinstance(data, dict) else None
        return str(info.get("status") or "unknown") if isinstance(info, dict) else GONE
