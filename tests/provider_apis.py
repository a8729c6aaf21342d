"""Stand-ins for one instance at GCE, Hetzner Cloud, EC2 and vast.ai that check what they are
sent and refuse as the real services document, on the local stand-in (tests/fixtures_providers).

Where each answer comes from (read offline; /work/shared/notes/providers.md has the lines):
- GCE: the compute v1 discovery document and REST reference (instances.get/stop/delete/
  testIamPermissions; AttachedDisk.type SCRATCH is a Local SSD; StopInstanceRequest
  .discardLocalSsd "is required if the instance has any attached Local SSD disks"); the 400 a
  stop without it gets, as skypilot-org/skypilot#2586 and openshift/installer#8649 quote it;
  the metadata server's token answer (access_token, expires_in, token_type) and scopes list
  (cloud.google.com/compute/docs/access/authenticate-workloads); Google's JSON error shape.
- Hetzner Cloud: docs.hetzner.cloud ("Servers", "Errors": `locked` is HTTP 423, "there is
  already an action running"; a Read token "will only be allowed to perform GET requests",
  refused with `forbidden` 403); hcloud-python's fixtures for the server and action bodies.
- EC2: botocore's ec2 service-2.json (DryRun: "If you have the required permissions, the
  error response is DryRunOperation. Otherwise, it is UnauthorizedOperation"), EC2's error
  XML (APIReference/errors-overview.html); DryRunOperation comes as HTTP 412.
- vast.ai (tests/fixtures_providers.VastInstance): vast-ai/docs' OpenAPI for DELETE
  /api/v0/instances/{id}/ (a 200 whose body is {"success": false, "error", "msg"}), vast-cli's
  reading of it (vast.py: prints msg).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field

from runspec.clock import ManualClock
from tests.fixtures_providers import Answer, Recorded, StandIn

GCE_INSTANCE = "/compute/v1/projects/my-proj/zones/us-central1-a/instances/a3-trainer"
COMPUTE = "https://www.googleapis.com/auth/compute"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
COMPUTE_READONLY = "https://www.googleapis.com/auth/compute.readonly"
LOCAL_SSD_400 = (
    "VM has a Local SSD attached but an undefined value for `discard-local-ssd`. If using "
    "gcloud, please add `--discard-local-ssd=false` or `--discard-local-ssd=true` to your command."
)


def gce_error(code: int, message: str, reason: str) -> Answer:
    return Answer(
        code,
        {
            "error": {
                "code": code,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
            }
        },
    )


@dataclass
class GceInstance:
    """An A3-like VM: two Local SSDs (SCRATCH), a service account whose tokens expire
    `token_life` s after they are handed out (on `clock`), the IAM permissions `granted`."""

    standin: StandIn
    clock: ManualClock
    local_ssds: int = 2
    granted: tuple[str, ...] = ("compute.instances.stop", "compute.instances.delete")
    scopes: tuple[str, ...] = (CLOUD_PLATFORM,)
    token_life: int = 3599
    status: str = "RUNNING"
    unreadable: int = 0  # the first reads of the instance answer 503
    tokens: dict[str, float] = field(default_factory=dict)  # token -> monotonic expiry
    refused: list[str] = field(default_factory=list)  # each refusal's message, in order

    def __post_init__(self) -> None:
        meta = "/computeMetadata/v1"
        self.standin.on("GET", meta + "/instance/name", Answer(200, "a3-trainer"))
        self.standin.on(
            "GET", meta + "/instance/zone", Answer(200, "projects/9/zones/us-central1-a")
        )
        self.standin.on("GET", meta + "/project/project-id", Answer(200, "my-proj"))
        self.standin.on(
            "GET",
            meta + "/instance/service-accounts/default/scopes",
            Answer(200, "\n".join(self.scopes) + "\n"),
        )
        self.standin.reply_with(
            "GET", meta + "/instance/service-accounts/default/token", self._token
        )
        self.standin.reply_with("GET", GCE_INSTANCE, self._get)
        self.standin.reply_with("DELETE", GCE_INSTANCE, self._delete)
        self.standin.reply_with("POST", GCE_INSTANCE + r"/stop(\?.*)?", self._stop)
        self.standin.reply_with("POST", GCE_INSTANCE + "/testIamPermissions", self._test)

    def _token(self, request: Recorded) -> Answer:
        if request.header("Metadata-Flavor") != "Google":
            return Answer(403, "Missing Metadata-Flavor:Google header.")
        token = f"ya29.token-{len(self.tokens)}"
        self.tokens[token] = self.clock.monotonic() + self.token_life
        return Answer(
            200, {"access_token": token, "expires_in": self.token_life, "token_type": "Bearer"}
        )

    def _auth(self, request: Recorded) -> Answer | None:
        token = (request.header("Authorization") or "").removeprefix("Bearer ")
        if self.tokens.get(token, 0.0) <= self.clock.monotonic():
            message = "Request had invalid authentication credentials."
            self.refused.append(message)
            return Answer(
                401, {"error": {"code": 401, "message": message, "status": "UNAUTHENTICATED"}}
            )
        return None

    def _may(self, permission: str) -> Answer | None:
        if not {COMPUTE, CLOUD_PLATFORM} & set(self.scopes):
            message = "Request had insufficient authentication scopes."
            self.refused.append(message)
            return gce_error(403, message, "insufficientPermissions")
        if permission not in self.granted:
            where = "projects/my-proj/zones/us-central1-a/instances/a3-trainer"
            message = f"Required '{permission}' permission for '{where}'"
            self.refused.append(message)
            return gce_error(403, message, "forbidden")
        return None

    def _get(self, request: Recorded) -> Answer:
        if (refusal := self._auth(request)) is not None:
            return refusal
        if self.unreadable > 0:
            self.unreadable -= 1
            return gce_error(503, "Internal error. Please try again.", "backendError")
        if self.status == "DELETED":
            return gce_error(404, "The resource 'a3-trainer' was not found", "notFound")
        disks = [{"type": "PERSISTENT", "deviceName": "boot", "boot": True}] + [
            {"type": "SCRATCH", "deviceName": f"local-ssd-{n}", "interface": "NVME"}
            for n in range(self.local_ssds)
        ]
        return Answer(
            200,
            {
                "kind": "compute#instance",
                "name": "a3-trainer",
                "status": self.status,
                "disks": disks,
            },
        )

    def _stop(self, request: Recorded) -> Answer:
        refusal = self._auth(request) or self._may("compute.instances.stop")
        if refusal is not None:
            return refusal
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query)
        if self.local_ssds and query.get("discardLocalSsd") not in (["true"], ["false"]):
            self.refused.append(LOCAL_SSD_400)
            return gce_error(400, LOCAL_SSD_400, "badRequest")
        self.status = "STOPPING"
        return Answer(
            200, {"kind": "compute#operation", "operationType": "stop", "status": "RUNNING"}
        )

    def _delete(self, request: Recorded) -> Answer:
        refusal = self._auth(request) or self._may("compute.instances.delete")
        if refusal is not None:
            return refusal
        self.status = "DELETED"
        return Answer(
            200, {"kind": "compute#operation", "operationType": "delete", "status": "RUNNING"}
        )

    def _test(self, request: Recorded) -> Answer:
        if (refusal := self._auth(request)) is not None:
            return refusal
        asked = request.json().get("permissions") or []
        held = [p for p in asked if p in self.granted]
        return Answer(200, {"permissions": held} if held else {})


@dataclass
class HetznerServer:
    """One server; `locks` DELETEs answered 423 `locked` before one is taken; a Read token
    (`read_only`) gets `forbidden` on every write."""

    standin: StandIn
    locks: int = 0
    read_only: bool = False
    status: str = "running"
    deletes: list[int] = field(default_factory=list)  # the status each DELETE got

    PATH = "/v1/servers/42001337"

    def __post_init__(self) -> None:
        self.standin.on("GET", "/hetzner/v1/metadata/instance-id", Answer(200, "42001337"))
        self.standin.reply_with("GET", self.PATH, self._get)
        self.standin.reply_with("DELETE", self.PATH, self._delete)

    def _get(self, request: Recorded) -> Answer:
        if self.status == "gone":
            return Answer(
                404, {"error": {"code": "not_found", "message": "server not found", "details": {}}}
            )
        server = {
            "id": 42001337,
            "name": "trainer",
            "status": self.status,
            "locked": self.locks > 0,
        }
        return Answer(200, {"server": server})

    def _delete(self, request: Recorded) -> Answer:
        if self.read_only:
            self.deletes.append(403)
            return Answer(
                403,
                {
                    "error": {
                        "code": "forbidden",
                        "message": "insufficient permissions for this request",
                        "details": {},
                    }
                },
            )
        if self.locks > 0:
            self.locks -= 1
            self.deletes.append(423)
            return Answer(
                423, {"error": {"code": "locked", "message": "server is locked", "details": {}}}
            )
        self.deletes.append(200)
        self.status = "gone"
        action = {"id": 13, "command": "delete_server", "status": "running", "progress": 0}
        return Answer(200, {"action": action})


def ec2_error(status: int, code: str, message: str) -> Answer:
    return Answer(
        status,
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>",
    )


@dataclass
class Ec2Instance:
    """One instance; the credentials are allowed the actions in `allowed` (IAM)."""

    standin: StandIn
    allowed: tuple[str, ...] = ("DescribeInstances", "StopInstances", "TerminateInstances")
    state: str = "running"
    acted: list[str] = field(default_factory=list)  # the actions that took effect

    def __post_init__(self) -> None:
        self.standin.reply_with("POST", "/ec2/", self._ec2)

    def _ec2(self, request: Recorded) -> Answer:
        form = {k: v[0] for k, v in urllib.parse.parse_qs(request.body.decode()).items()}
        action = form.get("Action", "")
        if action not in self.allowed:
            return ec2_error(
                403, "UnauthorizedOperation", "You are not authorized to perform this operation."
            )
        if form.get("DryRun") == "true":
            return ec2_error(
                412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."
            )
        ns = 'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"'
        if action == "DescribeInstances":
            return Answer(
                200,
                f"<DescribeInstancesResponse {ns}><reservationSet><item><instancesSet><item>"
                f"<instanceId>i-0abc123def4567890</instanceId><instanceState><name>{self.state}"
                "</name></instanceState></item></instancesSet></item></reservationSet>"
                "</DescribeInstancesResponse>",
            )
        self.acted.append(action)
        self.state = "shutting-down" if action == "TerminateInstances" else "stopping"
        return Answer(200, f"<{action}Response {ns}/>")
