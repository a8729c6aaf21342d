"""Google Compute Engine: name, zone and project from the metadata server, an access token from
the instance's service account (metadata again; no key file needed).

Metadata (cloud.google.com/compute/docs/metadata, header `Metadata-Flavor: Google`), base
http://metadata.google.internal/computeMetadata/v1:
  instance/name, instance/zone (projects/NUM/zones/ZONE), project/project-id,
  instance/service-accounts/default/token -> {"access_token": ...}
Compute API (cloud.google.com/compute/docs/reference/rest/v1/instances), Bearer token, base
https://compute.googleapis.com/compute/v1:
  destroy: DELETE /projects/{p}/zones/{z}/instances/{name}
  stop:    POST   /projects/{p}/zones/{z}/instances/{name}/stop
  state:   GET    /projects/{p}/zones/{z}/instances/{name} -> {"status": "RUNNING" | "STOPPING"
           | "TERMINATED" | ...}; 404 once deleted. A stopped instance still bills its disks.
"""

from __future__ import annotations

from typing import ClassVar

from runspec.providers.base import GONE, Action, Provider, ProviderError

FLAVOR = {"Metadata-Flavor": "Google"}


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

    def _headers(self) -> dict[str, str]:
        if self._token is None:
            resp = self.http.request(
                "GET", f"{self.metadata}/instance/service-accounts/default/token", headers=FLAVOR
            )
            data = resp.json()
            token = data.get("access_token") if isinstance(data, dict) else None
            if not token:
                raise ProviderError("gcp: the metadata server gave no access token")
            self._token = str(token)
            self.http.secrets.append(self._token)
        return {"Authorization": f"Bearer {self._token}"}

    def describe_call(self, action: Action, instance: str) -> str:
        if action is Action.DESTROY:
            return f"DELETE {self.api}/{instance}"
        return f"POST {self.api}/{instance}/stop"

    def call(self, action: Action, instance: str) -> None:
        if action is Action.DESTROY:
            self.http.request("DELETE", f"{self.api}/{instance}", headers=self._headers())
        else:
            self.http.request("POST", f"{self.api}/{instance}/stop", headers=self._headers())

    def state(self, instance: str) -> str:
        resp = self.http.request(
            "GET", f"{self.api}/{instance}", headers=self._headers(), ok=(200, 404)
        )
        if resp.status == 404:
            return GONE
        data = resp.json()
        return str(data.get("status") or "unknown") if isinstance(data, dict) else GONE
