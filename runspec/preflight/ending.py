"""The preflight proves the end: whatever the finish will do, it can be done on this machine.

A wrong provider setup used to surface at hour 8, with the machine billing on. Checked now,
changing nothing: for destroy, stop and auto the provider is detected or named, the instance
identified, the credentials present and one read-only call (the instance's state) answered;
the right to end it is proven where the API can say so without acting (AWS DryRun, GCP
testIamPermissions) and named as unproven where it cannot (vast, RunPod, Lambda, Hetzner);
for poweroff this process can power the machine off; for a command, the program is there.
`finish.unverified` is checked too, as a warning: it only acts when a push fails.

Runs in the parent (the daemon, `runspec preflight`), never the torch child: provider keys
are read by the finish alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.machine.host import FinishHost, container_reason
from runspec.preflight.localssd import local_ssd_checks
from runspec.providers import Action, ProviderError, get_provider
from runspec.spec.model import FinishAction, FinishSpec, Unverified

NAME = "finish"
PROVIDER_ACTIONS = frozenset({FinishAction.DESTROY, FinishAction.STOP, FinishAction.AUTO})
SYSTEMD = Path("/run/systemd/system")


def _provider(finish: FinishSpec, env: Mapping[str, str] | None, need_stop: bool) -> str:
    """What the provider check found, in one line; raises ProviderError."""
    provider, how = get_provider(finish.provider, env)
    if need_stop and not provider.can_stop:
        raise ProviderError(f"{provider.name} cannot stop an instance: {provider.stop_bills}")
    found = provider.check(_actions(finish.action, need_stop, provider.can_stop))
    return f"{found} (provider {provider.name}: {how})"


def _actions(action: FinishAction, need_stop: bool, can_stop: bool) -> tuple[Action, ...]:
    """What the end will ask of the provider (auto: whichever the cost rule picks)."""
    if need_stop or action is FinishAction.STOP:
        return (Action.STOP,)
    if action is FinishAction.AUTO and can_stop:
        return (Action.DESTROY, Action.STOP)
    return (Action.DESTROY,)


def _poweroff(host: FinishHost) -> str | None:
    """Why this process cannot power the machine off (None: it can)."""
    reason = container_reason(host)
    if reason is not None:
        return f"this is a container ({reason}): a poweroff ends no billing here"
    if not (host.root / str(SYSTEMD).lstrip("/")).is_dir():
        return "systemd is not PID 1 here, so `systemctl poweroff` cannot work"
    if shutil.which("systemctl") is None:
        return "systemctl is not installed"
    if os.geteuid() != 0:
        return "runspec does not run as root, and only root may power the machine off"
    return None


def _command(argv: tuple[str, ...]) -> str | None:
    exe = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    if exe is None:
        return f"{argv[0]!r} is not on PATH"
    if not os.access(exe, os.X_OK) or not Path(exe).is_file():
        return f"{exe} is not an executable file"
    return None


def finish_checks(
    finish: FinishSpec,
    env: Mapping[str, str] | None = None,
    host: FinishHost | None = None,
    folders: Sequence[Path] = (),
) -> list[CheckResult]:
    """`folders`: the run's own (state, runs), which a stop must keep."""
    host = host or FinishHost()
    action = finish.action
    if action is FinishAction.NONE:
        return [passed(NAME, "finish.action is none: the machine is left as it is")]
    results: list[CheckResult] = []
    if action in PROVIDER_ACTIONS:
        try:
            found = _provider(finish, env, need_stop=action is FinishAction.STOP)
            results.append(passed(NAME, f"{action.value} is possible: {found}"))
        except ProviderError as exc:
            results.append(
                failed(
                    NAME,
                    f"finish.action {action.value} cannot be done here: {exc}",
                    exc.fix
                    or "name the provider in finish.provider and give the daemon its API key in "
                    "/etc/runspec/env (see the README's Providers), or choose another finish",
                )
            )
    elif action is FinishAction.POWEROFF and (why := _poweroff(host)) is not None:
        results.append(
            failed(NAME, f"finish.action poweroff cannot work: {why}", "use stop or destroy")
        )
    elif action is FinishAction.COMMAND and (why := _command(finish.command)) is not None:
        results.append(failed(NAME, f"finish.command cannot run: {why}", "fix finish.command"))
    else:
        results.append(passed(NAME, f"finish.action {action.value} can run here"))
    results.append(_unverified(finish, env, host))
    return results + local_ssd_checks(finish, folders, host.root, env)


def _unverified(finish: FinishSpec, env: Mapping[str, str] | None, host: FinishHost) -> CheckResult:
    """What happens if the final push cannot be verified: only a warning when it cannot work,
    since it acts only then."""
    choice = finish.unverified
    fix = "fix the provider's setup, or set finish.unverified: keep"
    if choice is Unverified.KEEP:
        return passed(NAME, "unverified: keep leaves the machine running, loudly")
    if choice is Unverified.POWEROFF:
        why = _poweroff(host)
        if why is None:
            return passed(NAME, "unverified: poweroff is possible")
        return warned(NAME, f"finish.unverified poweroff could not work: {why}", fix)
    try:
        return passed(NAME, f"unverified: stop is possible: {_provider(finish, env, True)}")
    except ProviderError as exc:
        return warned(
            NAME,
            f"if the final push cannot be verified, finish.unverified stop could not work: {exc}",
            fix,
        )
