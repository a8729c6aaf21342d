"""Hetzner Cloud: the server id from the metadata server, the token from `HCLOUD_TOKEN`.

Metadata (docs.hetzner.cloud, "Server Metadata"): GET
  http://169.254.169.254/hetzner/v1/metadata/instance-id  -> the numeric server id (text)
Cloud API (docs.hetzner.cloud, base https://api.hetzner.cloud/v1, Bearer token):
  destroy: DELETE /servers/{id}  -> {"action": {...}}
  state:   GET    /servers/{id}  -> {"server": {"status": ...}}; 404 once deleted
A powered-off Hetzner server bills in full, so runspec never stops one: it deletes or keeps.
Refusals say {"error": {"code", "message"}} ("Errors" in the API reference): `locked` (HTTP 423,
an action already runs on the server) is asked again later; `forbidden` (a Read token: "only
allowed to perform GET requests") and `protected` are not.
"""

from __future__ import annotations

from typing import ClassVar

from runspec.providers.base import GONE, Action, Provider, ProviderError
from runspec.units import plain_int

# What to do about the refusals that asking again cannot change.
FIXES = {
    "forbidden": "a Read token may only GET: give runspec a Read & Write token",
    "protected": "the server has delete protection: remove it in the console or with "
    "`hcloud server disable-protection`",
}


class Hetzner(Provider):
    name = "hetzner"
    can_stop = False
    stop_bills = "a stopped Hetzner server bills in full; only deleting it ends the billing"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.DESTROY: frozenset({"deleting"}),
    }
    secret_env = ("HCLOUD_TOKEN",)

    @property
    def metadata(self) -> str:
        default = "http://169.254.169.254/hetzner/v1/metadata"
        return self.env.get("RUNSPEC_HETZNER_METADATA", default).rstrip("/")

    @property
    def api(self) -> str:
        return self.env.get("RUNSPEC_HETZNER_API", "https://api.hetzner.cloud/v1").rstrip("/")

    def identify(self) -> str:
        resp = self.http.request("GET", f"{self.metadata}/instance-id", timeout=3.0)
        server = resp.text.strip()
        if plain_int(server) is None:
            raise ProviderError(f"hetzner: the metadata server gave no server id ({server[:40]!r})")
        return server

    def how_identified(self) -> str:
        return "the metadata server's instance-id"

    def _headers(self) -> dict[str, str]:
        token = self.env.get("HCLOUD_TOKEN")
        if not token:
            raise ProviderError("hetzner: HCLOUD_TOKEN is not set")
        return {"Authorization": f"Bearer {token}"}

    def describe_call(self, action: Action, instance: str) -> str:
        return f"DELETE {self.api}/servers/{instance}"

    def call(self, action: Action, instance: str) -> None:
        try:
            self.http.request("DELETE", f"{self.api}/servers/{instance}", headers=self._headers())
        except ProviderError as exc:
            hint = FIXES.get(exc.code or "")
            if hint is None:
                raise
            raise ProviderError(
                f"{exc} ({hint})", status=exc.status, retry_after=exc.retry_after, code=exc.code
            ) from exc

    def state(self, instance: str) -> str:
        resp = self.http.request(
            "GET", f"{self.api}/servers/{instance}", headers=self._headers(), ok=(200, 404)
        )
        if resp.status == 404:
            return GONE
        data = resp.json()
        server = data.get("server") if isinstance(data, dict) else None
        return str(server.get("status") or "unknown") if isinstance(server, dict) else GONE
