"""vast.ai: the instance is `CONTAINER_ID`, the key `CONTAINER_API_KEY` (an instance-scoped key
vast puts in the container's environment; read from /proc/1/environ when missing here).

REST API (docs.vast.ai/api, base https://console.vast.ai/api/v0, `Authorization: Bearer KEY`):
  destroy: DELETE /instances/{id}/                       (CLI `vastai destroy instance`)
  stop:    PUT    /instances/{id}/  {"state": "stopped"}  (CLI `vastai stop instance`)
  state:   GET    /instances/{id}/  -> {"instances": {"actual_status", "intended_status"}}
A destroy or a stop answered 200 may still be a refusal: {"success": false, "error", "msg"}
(vast-ai/docs api-reference/openapi: DELETE /api/v0/instances/{id}/, x-scope instance_write;
GET answers {"instances": null} for an instance that is gone).
A stopped vast instance still bills its disk (docs: "Disk charges continue; no GPU charges").
"""

from __future__ import annotations

from typing import ClassVar

from runspec.providers.answers import said
from runspec.providers.base import GONE, Action, Provider, ProviderError, env_or_file, not_on


class Vast(Provider):
    name = "vast"
    can_stop = True
    stop_bills = "a stopped vast.ai instance still bills its disk"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.STOP: frozenset({"stopped", "exited", "stopping"}),
        Action.DESTROY: frozenset(),
    }
    proc_environ = "/proc/1/environ"
    secret_env = ("CONTAINER_API_KEY",)

    def _var(self, name: str) -> str | None:
        return env_or_file(self.env, name, self.env.get("RUNSPEC_PROC_ENVIRON", self.proc_environ))

    @property
    def api(self) -> str:
        return self.env.get("RUNSPEC_VAST_API", "https://console.vast.ai").rstrip("/") + "/api/v0"

    def identify(self) -> str:
        instance = self._var("CONTAINER_ID")
        if not instance:
            raise ProviderError(
                "vast: CONTAINER_ID is not set here nor in /proc/1/environ",
                fix=not_on("a vast.ai container", "vast.ai instance", "CONTAINER_ID"),
            )
        return instance

    def how_identified(self) -> str:
        return "CONTAINER_ID"

    def _headers(self) -> dict[str, str]:
        key = self._var("CONTAINER_API_KEY")
        if not key:
            raise ProviderError(
                "vast: CONTAINER_API_KEY is not set here nor in /proc/1/environ "
                "(vast sets it in every instance; set it in /etc/runspec/env)"
            )
        return {"Authorization": f"Bearer {key}"}

    def describe_call(self, action: Action, instance: str) -> str:
        url = f"{self.api}/instances/{instance}/"
        if action is Action.DESTROY:
            return f"DELETE {url}"
        return f'PUT {url} {{"state": "stopped"}}'

    def call(self, action: Action, instance: str) -> None:
        url = f"{self.api}/instances/{instance}/"
        if action is Action.DESTROY:
            resp = self.http.request("DELETE", url, headers=self._headers())
        else:
            body = {"state": "stopped"}
            resp = self.http.request("PUT", url, headers=self._headers(), json_body=body)
        # A 200 is not a success: vast answers {"success": false, "msg": ...} for a refusal
        # (its OpenAPI for DELETE /instances/{id}/); vast-cli prints msg and stops there.
        try:
            data = resp.json()
        except ProviderError:
            data = None  # no verdict in the body: the state polls that follow tell
        if isinstance(data, dict) and data.get("success") is False:
            why = said(resp.body)
            method = "DELETE" if action is Action.DESTROY else "PUT"
            raise ProviderError(
                f"vast: {method} {url}: HTTP 200 with success false: "
                f"{self.http.redact(why.text) or 'no reason given'}",
                code=why.code,
            )

    def state(self, instance: str) -> str:
        url = f"{self.api}/instances/{instance}/"
        resp = self.http.request("GET", url, headers=self._headers(), ok=(200, 404))
        if resp.status == 404:
            return GONE
        data = resp.json()
        info = data.get("instances") if isinstance(data, dict) else None
        if not info:
            return GONE
        actual = str(info.get("actual_status") or "")
        intended = str(info.get("intended_status") or "")
        # A stop is under way once vast intends it, even while the container still runs.
        if intended == "stopped" and actual != "stopped":
            return "stopping"
        return actual or "unknown"
