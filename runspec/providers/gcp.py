"""Google Compute Engine: name, zone and project from the metadata server, an access token from
the instance's service account (metadata again; no key file needed).

Metadata (cloud.google.com/compute/docs/metadata, header `Metadata-Flavor: Google`), base
http://metadata.google.internal/computeMetadata/v1:
  instance/name, instance/zone (projects/NUM/zones/ZONE), project/project-id,
  instance/service-accounts/default/token -> {"access_token", "expires_in", "token_type"}
  instance/service-accounts/default/scopes -> one OAuth scope a line
Compute API (cloud.google.com/compute/docs/reference/rest/v1/instances, and the compute v1
discovery document), Bearer token, base https://compute.googleapis.com/compute/v1:
  destroy: DELETE /projects/{p}/zones/{z}/instances/{name}
  stop:    POST   /projects/{p}/zones/{z}/instances/{name}/stop[?discardLocalSsd=true]
           discardLocalSsd "is required if the instance has any attached Local SSD disks":
           without it such a stop answers 400 (skypilot-org/skypilot#2586).
  state:   GET    /projects/{p}/zones/{z}/instances/{name} -> {"status": "RUNNING" | "STOPPING"
           | "TERMINATED" | ..., "disks": [{"type": "SCRATCH" | "PERSISTENT", "deviceName"}]};
           404 once deleted. A Local SSD is a SCRATCH disk. A stopped instance bills its disks.
  permission: POST .../instances/{name}/testIamPermissions {"permissions": [...]} -> the subset
           the caller holds ({} when none): a check that acts on nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar

from runspec.printable import printable
from runspec.providers.base import GONE, Action, Provider, ProviderError, Response
from runspec.units import plain_int

FLAVOR = {"Metadata-Flavor": "Google"}
# A token is fetched anew this long before the metadata server says it expires: a stop can
# come half an hour into an end window, long after the token the preflight read.
TOKEN_MARGIN_S = 120.0
PERMISSION = {Action.STOP: "compute.instances.stop", Action.DESTROY: "compute.instances.delete"}
# The VM's scopes that let its service account call instances.stop or delete at all.
WRITE_SCOPES = frozenset(
    {
        "https://www.googleapis.com/auth/compute",
        "https://www.googleapis.com/auth/cloud-platform",
    }
)
LOCAL_SSD_400 = ("local ssd", "discard-local-ssd", "discardlocalssd")


class GCP(Provider):
    name = "gcp"
    can_stop = True
    stop_bills = "a stopped Compute Engine instance still bills its persistent disks"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.STOP: frozenset({"STOPPING", "TERMINATED", "STOPPED"}),
        # A delete first stops the instance: STOPPING after a delete request means going.
        Action.DESTROY: frozenset({"STOPPING", "TERMINATED"}),
    }
    _token: str | None = None
    _token_until = 0.0  # monotonic time after which the token is fetched anew
    _local_ssds: tuple[str, ...] | None = None  # the Local SSDs' device names, once read
    # The access token comes from the metadata server when the finish asks; no variable holds it.
    secret_env = ()

    def secrets(self) -> tuple[str, ...]:
        return (self._token,) if self._token else ()

    @property
    def metadata(self) -> str:
        default = "http://metadata.google.internal/computeMetadata/v1"
        return self.env.get("RUNSPEC_GCP_METADATA", default).rstrip("/")

    @property
    def api(self) -> str:
        default = "https://compute.googleapis.com/compute/v1"
        return self.env.get("RUNSPEC_GCP_COMPUTE_API", default).rstrip("/")

    def _meta(self, path: str) -> str:
        return self.http.request(
            "GET", f"{self.metadata}/{path}", headers=FLAVOR, timeout=3.0
        ).text.strip()

    def identify(self) -> str:
        name = self._meta("instance/name")
        zone = self._meta("instance/zone").rsplit("/", 1)[-1]
        project = self._meta("project/project-id")
        if not (name and zone and project):
            raise ProviderError("gcp: the metadata server did not name the instance")
        return f"projects/{project}/zones/{zone}/instances/{name}"

    def how_identified(self) -> str:
        return "the metadata server's instance name, zone and project"

    def _fetch_token(self) -> None:
        resp = self.http.request(
            "GET", f"{self.metadata}/instance/service-accounts/default/token", headers=FLAVOR
        )
        data = resp.json()
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise ProviderError("gcp: the metadata server gave no access token")
        lasts = plain_int(str(data.get("expires_in", ""))) or 0
        self._token = token
        self._token_until = self.clock.monotonic() + min(lasts, 86400) - TOKEN_MARGIN_S
        self.http.secrets.append(token)

    def _headers(self) -> dict[str, str]:
        if self._token is None or self.clock.monotonic() >= self._token_until:
            self._fetch_token()
        return {"Authorization": f"Bearer {self._token}"}

    def _api_call(self, method: str, url: str, **kwargs: Any) -> Response:
        """One Compute API request; a 401 (the token expired early) fetches a token once more."""
        try:
            return self.http.request(method, url, headers=self._headers(), **kwargs)
        except ProviderError as exc:
            if exc.status != 401:
                raise
            self._token = None
            return self.http.request(method, url, headers=self._headers(), **kwargs)

    def local_ssds(self, instance: str) -> tuple[str, ...]:
        """The device names of the instance's Local SSDs (its SCRATCH disks)."""
        if self._local_ssds is None:
            data = self._api_call("GET", f"{self.api}/{instance}").json()
            disks = data.get("disks") if isinstance(data, dict) else None
            self._local_ssds = tuple(
                printable(str(d.get("deviceName") or f"disk {n}")[:64])
                for n, d in enumerate(disks if isinstance(disks, list) else [])
                if isinstance(d, dict) and d.get("type") == "SCRATCH"
            )
        return self._local_ssds

    def _stop_url(self, instance: str, discard: bool) -> str:
        return f"{self.api}/{instance}/stop" + ("?discardLocalSsd=true" if discard else "")

    def _discards(self, instance: str) -> bool:
        try:
            return bool(self.local_ssds(instance))
        except ProviderError:
            return False  # unknown now: a 400 naming the Local SSD says so at the stop

    def describe_call(self, action: Action, instance: str) -> str:
        if action is Action.DESTROY:
            return f"DELETE {self.api}/{instance}"
        return f"POST {self._stop_url(instance, self._discards(instance))}"

    def call(self, action: Action, instance: str) -> None:
        if action is Action.DESTROY:
            self._api_call("DELETE", f"{self.api}/{instance}")
            return
        discard = self._discards(instance)
        try:
            self._api_call("POST", self._stop_url(instance, discard))
        except ProviderError as exc:
            # The disks could not be read before, and GCE says the stop needs the flag.
            if (
                discard
                or exc.status != 400
                or not any(w in str(exc).lower() for w in LOCAL_SSD_400)
            ):
                raise
            self._local_ssds = ("a Local SSD",)
            self._api_call("POST", self._stop_url(instance, True))

    def prove(self, actions: tuple[Action, ...], instance: str) -> str:
        scopes = set(self._meta("instance/service-accounts/default/scopes").split())
        if not scopes & WRITE_SCOPES:
            shown = printable(", ".join(sorted(scopes))[:300]) or "none"
            raise ProviderError(
                f"gcp: the VM's service account scopes ({shown}) "
                "allow no compute write: a stop or delete would be refused (403); give the VM "
                "the compute or cloud-platform scope"
            )
        wanted = sorted({PERMISSION[a] for a in actions})
        data = self._api_call(
            "POST", f"{self.api}/{instance}/testIamPermissions", json_body={"permissions": wanted}
        ).json()
        held = data.get("permissions") if isinstance(data, dict) else None
        missing = [p for p in wanted if not (isinstance(held, list) and p in held)]
        if missing:
            raise ProviderError(
                f"gcp: the service account may not end instance {instance}: testIamPermissions "
                f"says it lacks {', '.join(missing)}; grant them (roles/compute.instanceAdmin.v1)"
            )
        said = f"testIamPermissions grants {', '.join(wanted)}"
        if Action.STOP in actions and (ssds := self.local_ssds(instance)):
            said += (
                f"; a stop discards the data on its Local SSD ({', '.join(ssds)}): GCE stops "
                "such a VM only with discardLocalSsd=true"
            )
        return said

    def state(self, instance: str) -> str:
        resp = self._api_call("GET", f"{self.api}/{instance}", ok=(200, 404))
        if resp.status == 404:
            return GONE
        data = resp.json()
        return str(data.get("status") or "unknown") if isinstance(data, dict) else GONE
