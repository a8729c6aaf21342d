"""RunPod: the pod is `RUNPOD_POD_ID`, the key `RUNPOD_API_KEY` (RunPod sets both in a pod).

REST API (docs.runpod.io/api-reference, base https://rest.runpod.io/v1, `Authorization: Bearer`):
  destroy: DELETE /pods/{podId}          (terminate: the pod and its container disk go)
  stop:    POST   /pods/{podId}/stop     (the volume is kept and billed)
  state:   GET    /pods/{podId}          -> {"desiredStatus": "RUNNING" | "EXITED" | "TERMINATED"}
The OpenAPI document (runpod/docs api-reference/openapi.json) has DELETE answer 204 and GET
404 "Pod not found", and documents no error body; a key's right to write is not checkable
without acting (keys are All, Restricted per API, or Read Only).
"""

from __future__ import annotations

from typing import ClassVar

from runspec.providers.base import GONE, Action, Provider, ProviderError, env_or_file, not_on


class RunPod(Provider):
    name = "runpod"
    can_stop = True
    stop_bills = "a stopped RunPod pod still bills its volume disk"
    going_after: ClassVar[dict[Action, frozenset[str]]] = {
        Action.STOP: frozenset({"EXITED", "TERMINATED"}),
        Action.DESTROY: frozenset({"TERMINATED"}),
    }
    proc_environ = "/proc/1/environ"
    secret_env = ("RUNPOD_API_KEY",)

    def _var(self, name: str) -> str | None:
        return env_or_file(self.env, name, self.env.get("RUNSPEC_PROC_ENVIRON", self.proc_environ))

    @property
    def api(self) -> str:
        return self.env.get("RUNSPEC_RUNPOD_API", "https://rest.runpod.io/v1").rstrip("/")

    def identify(self) -> str:
        pod = self._var("RUNPOD_POD_ID")
        if not pod:
            raise ProviderError(
                "runpod: RUNPOD_POD_ID is not set here nor in /proc/1/environ",
                fix=not_on("a RunPod pod", "RunPod pod", "RUNPOD_POD_ID"),
            )
        return pod

    def how_identified(self) -> str:
        return "RUNPOD_POD_ID"

    def _headers(self) -> dict[str, str]:
        key = self._var("RUNPOD_API_KEY")
        if not key:
            raise ProviderError("runpod: RUNPOD_API_KEY is not set here nor in /proc/1/environ")
        return {"Authorization": f"Bearer {key}"}

    def describe_call(self, action: Action, instance: str) -> str:
        if action is Action.DESTROY:
            return f"DELETE {self.api}/pods/{instance}"
        return f"POST {self.api}/pods/{instance}/stop"

    def call(self, action: Action, instance: str) -> None:
        if action is Action.DESTROY:
            self.http.request("DELETE", f"{self.api}/pods/{instance}", headers=self._headers())
        else:
            self.http.request("POST", f"{self.api}/pods/{instance}/stop", headers=self._headers())

    def state(self, instance: str) -> str:
        resp = self.http.request(
            "GET", f"{self.api}/pods/{instance}", headers=self._headers(), ok=(200, 404)
        )
        if resp.status == 404:
            return GONE
        data = resp.json()
        if not isinstance(data, dict) or not data:
            return GONE
        return str(data.get("desiredStatus") or "unknown")
