"""One watcher pass over its targets: ORG names become their runspec repos, each repo is watched
(runspec.watch.act), each line said, and what needs a person notified.

An ORG is listed with `HfApi.list_models(author=ORG, filter="runspec")`: a run's repo carries
the `runspec` tag from its first push. A listing that fails is a failed pass (fail closed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from runspec.alerts import Alerts, Message
from runspec.hubreach import endpoint_set
from runspec.push.base import one_line
from runspec.voice import error, warning
from runspec.watch.act import Seen, WatchOptions, watch_repo
from runspec.watch.lease import LeaseError

TAG = "runspec"


def repos_of(targets: Sequence[str]) -> list[str]:
    """owner/name repos as given; an ORG's runspec-tagged model repos. Raises LeaseError."""
    from huggingface_hub import HfApi

    out: list[str] = []
    api = HfApi(endpoint=endpoint_set())
    for target in targets:
        if "/" in target:
            out.append(target)
            continue
        try:
            out += [m.id for m in api.list_models(author=target, filter=TAG)]
        except Exception as exc:  # any client or network fault: the pass cannot see the org
            raise LeaseError(f"cannot list {target}'s runspec repos: {one_line(exc)}") from exc
    return list(dict.fromkeys(out))


def line(seen: Seen) -> str:
    if seen.error and seen.verdict == "error":
        return error(f"{seen.repo}: cannot judge its lease, nothing called: {seen.error}")
    if seen.verdict == "notify":
        return warning(f"{seen.repo}: {seen.reason}")
    if seen.verdict == "would-end":
        return f"{seen.repo}: would {seen.action} (dry run): {seen.reason}"
    if seen.verdict == "end":
        done = "confirmed" if seen.confirmed else "NOT confirmed"
        text = f"{seen.repo}: {seen.action} by watch, {done}: {seen.reason}"
        return error(f"{text}: {seen.error}") if seen.error else text
    return f"{seen.repo}: {seen.verdict}: {seen.reason}"


def watch_pass(
    targets: Sequence[str],
    opts: WatchOptions,
    notify: Sequence[str],
    *,
    say: Callable[[str], None] = print,
) -> tuple[list[Seen], bool]:
    """(what each repo came to, whether the pass is clean: every repo read, every end
    confirmed, nothing left for a person)."""
    alerts = Alerts(notify, say, environ=os.environ)
    try:
        repos = repos_of(targets)
    except LeaseError as exc:
        seen = [Seen(", ".join(targets), "error", "", error=str(exc))]
    else:
        seen = [watch_repo(repo, opts) for repo in repos]
    for item in seen:
        say(line(item))
        if item.error or item.verdict == "end":
            kind = "failure" if item.error else "warning"
            alerts.send_and_wait(Message(f"watch: {item.verdict}", f"runspec watch: {item.repo}",
                                         line(item), kind))  # fmt: skip
    return seen, not any(s.error for s in seen)
