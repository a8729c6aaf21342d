"""The daemon's configuration: `/etc/runspec/runspecd.yaml` by default; a missing file means
defaults. Command-line options override the file; unknown keys are errors so typos are caught."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runspec.alerts import URL_FORM, URL_HINT
from runspec.daemon.followspec import FollowSpec
from runspec.daemon.gitmirror import check_branch, check_remote
from runspec.errors import UsageError
from runspec.spec.model import FinishAction, FinishSpec
from runspec.spec.rules import check_rules
from runspec.spec.schema_errors import did_you_mean
from runspec.spec.yamlload import YamlDocument, load_yaml
from runspec.store.paths import CONFIG_FILE, StateLayout, default_state_dir
from runspec.units import parse_duration

DEFAULT_CONFIG = CONFIG_FILE

KNOWN_KEYS = (
    "inbox",
    "state",
    "data",
    "runs",
    "hourly_cost",
    "finish",
    "finish_dry_run",
    "idle_finish",
    "rescan_every",
    "incomplete_wait",
    "inbox_settle",
    "shutdown_push_timeout",
    "writable",
    "notify",
    "follow",
)


class ConfigError(UsageError):
    pass


@dataclass(frozen=True)
class DaemonConfig:
    state: Path
    inbox: Path
    data: Path
    runs: Path
    hourly_cost: float | None = None
    # The finish the idle finish applies (a spec's own finish is used for its own run).
    finish: FinishSpec = field(default_factory=FinishSpec)
    finish_dry_run: bool = False
    # Seconds with nothing running or queued, after a run has ended, before the idle finish.
    idle_finish: float | None = None
    rescan_every: float = 30.0
    incomplete_wait: float = 60.0
    # After a spec's writer closed it, how long it must stay unchanged before it is taken.
    inbox_settle: float = 2.0
    shutdown_push_timeout: float = 240.0
    # Folders outside the state folder that specs may write (a volume for push.dir, an
    # output.project, a dataset.extract_to, an HF_HOME): the unit's sandbox lets the daemon
    # write only there (`runspec install` writes them into the unit's writable.conf).
    writable: tuple[Path, ...] = ()
    # Notification URLs for runs whose spec has no `notify:`, and for the idle finish.
    notify: tuple[str, ...] = ()
    # Repositories whose specs the daemon runs (runspec.daemon.follow).
    follow: tuple[FollowSpec, ...] = ()
    source: Path | None = None  # the file it was read from, None for defaults

    @property
    def claimed(self) -> Path:
        return StateLayout(self.state).claimed

    def with_overrides(self, **values: Any) -> DaemonConfig:
        return dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None})


def _finish(raw: Any, where: str) -> FinishSpec:
    if raw is None:
        return FinishSpec()
    if isinstance(raw, str):
        raw = {"action": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: finish must be an action name or a mapping")
    unknown = set(raw) - {"action", "provider", "command"}
    if unknown:
        raise ConfigError(f"{where}: finish: unknown key {sorted(unknown)[0]!r}")
    try:
        action = FinishAction(str(raw.get("action", "none")))
    except ValueError as exc:
        choices = ", ".join(a.value for a in FinishAction)
        raise ConfigError(f"{where}: finish.action must be one of {choices}") from exc
    command = raw.get("command") or ()
    if not isinstance(command, list | tuple) or not all(isinstance(c, str) for c in command):
        raise ConfigError(f"{where}: finish.command must be a list of strings (an argv)")
    if action is FinishAction.AUTO:
        # auto weighs a run's storage figures; the daemon's own finish has none to weigh.
        raise ConfigError(
            f"{where}: finish.action auto needs a spec's storage figures; use stop or destroy"
        )
    if action is FinishAction.COMMAND and not command:
        raise ConfigError(f"{where}: finish.action command needs finish.command")
    return FinishSpec(
        action=action, provider=str(raw.get("provider", "auto")), command=tuple(command)
    )


def _notify(raw: Any, where: str) -> tuple[str, ...]:
    """The same URLs a spec's `notify:` takes, checked by the same rules."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(u, str) and u for u in raw):
        raise ConfigError(f"{where}: notify must be a list of notification URLs")
    for finding in check_rules({"notify": raw}):
        raise ConfigError(f"{where}: notify[{finding.path[-1]}]: {finding.message}")
    for url in raw:
        if not URL_FORM.match(url):
            raise ConfigError(f"{where}: notify: {url!r} is not a notification URL ({URL_HINT})")
    return tuple(raw)


FOLLOW_KEYS = ("repo", "branch", "path", "every")


def _follow(raw: Any, at: Callable[[str], str]) -> tuple[FollowSpec, ...]:
    """`follow:` a list of {repo, branch, path, every}; each checked before any git runs."""
    if raw is None:
        return ()
    where = at("follow")
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: follow must be a list of {{repo: URL, branch: main}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("repo"), str):
            raise ConfigError(f"{where}: follow[{i}] needs `repo:` (a git URL or hf://...)")
        unknown = [k for k in item if k not in FOLLOW_KEYS]
        if unknown:
            hint = did_you_mean(str(unknown[0]), FOLLOW_KEYS)
            raise ConfigError(f"{where}: follow[{i}]: unknown key {unknown[0]!r}{hint}")
        branch, folder = str(item.get("branch", "main")), str(item.get("path", "specs"))
        for why in (check_remote(item["repo"]), check_branch(branch)):
            if why:
                raise ConfigError(f"{where}: follow[{i}]: {why}")
        if folder.startswith(("/", "-")) or ".." in folder.split("/") or not folder.strip("/"):
            raise ConfigError(f"{where}: follow[{i}]: path {folder!r} is a folder in the repo")
        every = _duration(item.get("every", "1m"), f"{where}: follow[{i}]", "every") or 60.0
        if every < 10:
            raise ConfigError(f"{where}: follow[{i}]: every is at least 10s")
        out.append(FollowSpec(item["repo"], branch, folder.strip("/"), every))
    return tuple(out)


def _path(raw: Any, base: Path) -> Path:
    path = Path(str(raw)).expanduser()
    return path if path.is_absolute() else (base / path)


def _duration(raw: Any, where: str, key: str) -> float | None:
    if raw is None or raw is False:
        return None
    try:
        return parse_duration(raw)
    except (ValueError, TypeError, UsageError) as exc:
        raise ConfigError(f"{where}: {key}: {exc}") from exc


def _writable(raw: Any, where: str) -> tuple[Path, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
        raise ConfigError(f"{where}: writable must be a list of folders (absolute paths)")
    folders = tuple(Path(item).expanduser() for item in raw)
    relative = [str(folder) for folder in folders if not folder.is_absolute()]
    if relative:
        # The unit's sandbox is written from these; relative to what would it be?
        raise ConfigError(f"{where}: writable: {relative[0]!r} is not an absolute path")
    return folders


def _read(cfg_path: Path) -> YamlDocument | None:
    """The config's document, read as a spec is (YAML 1.2, every key located); None when the
    file holds nothing (the defaults)."""
    try:
        data = cfg_path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {cfg_path}: {exc}") from exc
    doc, problems = load_yaml(data, str(cfg_path))
    if doc is not None and not problems:
        return doc
    first = problems[0]
    if doc is None and first.message.startswith("the file is empty"):
        return None  # comments only (the default file `runspec install` writes)
    if first.message.startswith("the top level is"):
        raise ConfigError(f"{cfg_path}:{first.line}:{first.column}: the config must be a mapping")
    raise ConfigError(f"{first.file}:{first.line}:{first.column}: {first.message}")


def load_config(
    path: Path | None, *, state: Path | None = None, inbox: Path | None = None
) -> DaemonConfig:
    """Read the config file (None or a missing default file: defaults), then apply overrides."""
    source: Path | None = None
    raw: dict[str, Any] = {}
    cfg_path = path or DEFAULT_CONFIG
    doc: YamlDocument | None = None
    if cfg_path.exists():
        doc = _read(cfg_path)
        raw = doc.data if doc is not None else {}
        source = cfg_path
    elif path is not None and path != DEFAULT_CONFIG:
        raise ConfigError(f"config file {path} does not exist")

    def at(key: str) -> str:
        """FILE:LINE:COL of a key, as a spec's problems are located."""
        mark = doc.key_mark((key,)) if doc is not None else None
        return f"{cfg_path}:{mark.line}:{mark.column}" if mark else str(cfg_path)

    def dur(key: str) -> float | None:
        return _duration(raw.get(key), at(key), key)

    unknown = [k for k in raw if k not in KNOWN_KEYS]
    if unknown:
        key = unknown[0]
        raise ConfigError(
            f"{at(key)}: unknown key {key!r}{did_you_mean(key, KNOWN_KEYS)} "
            f"(known: {', '.join(KNOWN_KEYS)})"
        )
    cwd = Path.cwd()
    state_dir = (
        state or (_path(raw["state"], cwd) if raw.get("state") else default_state_dir())
    ).absolute()
    hourly = raw.get("hourly_cost")
    if hourly is not None and (
        isinstance(hourly, bool) or not isinstance(hourly, int | float) or hourly < 0
    ):
        raise ConfigError(f"{at('hourly_cost')}: hourly_cost must be a number of USD per hour")
    dry = raw.get("finish_dry_run", False)
    if not isinstance(dry, bool):
        raise ConfigError(f"{at('finish_dry_run')}: finish_dry_run must be true or false")
    return DaemonConfig(
        state=state_dir,
        inbox=(
            inbox or (_path(raw["inbox"], cwd) if raw.get("inbox") else state_dir / "inbox")
        ).absolute(),
        data=_path(raw["data"], cwd) if raw.get("data") else state_dir / "data",
        runs=_path(raw["runs"], cwd) if raw.get("runs") else state_dir / "runs",
        hourly_cost=float(hourly) if hourly is not None else None,
        finish=_finish(raw.get("finish"), at("finish")),
        finish_dry_run=dry,
        idle_finish=dur("idle_finish"),
        rescan_every=dur("rescan_every") or 30.0,
        incomplete_wait=dur("incomplete_wait") or 60.0,
        inbox_settle=dur("inbox_settle") or 2.0,
        shutdown_push_timeout=dur("shutdown_push_timeout") or 240.0,
        writable=_writable(raw.get("writable"), at("writable")),
        notify=_notify(raw.get("notify"), at("notify")),
        follow=_follow(raw.get("follow"), at),
        source=source,
    )


DEFAULT_CONFIG_TEXT = """\
# runspecd's configuration. Every key is optional; a missing file means these defaults.
# state: /var/lib/runspec          # records, claimed specs, the machine's pending end
# inbox: /var/lib/runspec/inbox    # drop specs here (or `runspec submit`)
# data: /var/lib/runspec/data      # staged datasets, unless a spec says dataset.extract_to
# runs: /var/lib/runspec/runs      # run folders, unless a spec says output.project
# hourly_cost: 3.48                # USD per hour, for cost reports when a spec gives none
# finish: {action: none}           # what the idle finish does: none|stop|destroy|poweroff|command
# finish_dry_run: false            # print finish actions instead of doing them
# idle_finish: 30m                 # after a run ended, apply `finish` when idle this long (off)
# rescan_every: 30s                # inbox rescan, in case inotify missed something
# incomplete_wait: 1m              # how long a half-written spec is waited for
# inbox_settle: 2s                 # after its writer closed it, unchanged this long: taken
# shutdown_push_timeout: 4m        # at any stop, the most spent pushing the newest checkpoint
# writable: [/mnt/volume]          # folders outside the state folder that specs may write (a
#                                  # volume for push.dir, output.project, dataset.extract_to,
#                                  # HF_HOME); then `runspec install` and restart runspecd
# notify: [ntfy://my-topic]        # apprise URLs for runs whose spec has no notify: (and the
#                                  # idle finish); secrets as ${NAME}, set in /etc/runspec/env
# follow:                          # run the specs committed to a branch, each blob once
#   - repo: https://github.com/acme/experiments.git   # or ssh, git@host:path, file:///...,
#                                  # hf://datasets/acme/experiments (the box's Hub token)
#     branch: main
#     path: specs                  # the folder whose *.yaml are specs
#     every: 1m                    # how often the branch is read
"""
