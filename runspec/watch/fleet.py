"""One watcher pass over its targets: ORG names become their runspec repos, each repo is watched
(runspec.watch.act), each line said, and what needs a person notified.

An ORG is listed with `HfApi.list_models(author=ORG, filter="runspec")`: a run's repo carries
the `runspec` tag from its first push. A listing that fails is a failed pass (fail closed).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING

from runspec.alerts import Alerts, Message
from runspec.hubreach import endpoint_set
from runspec.hubread import within
from runspec.printable import printable
from runspec.push.base import one_line
from runspec.voice import error, warning
from runspec.watch.act import Seen, WatchOptions, claim, read_lease, watch_repo
from runspec.watch.lease import LeaseError
from runspec.watch.liveness import Reading

if TYPE_CHECKING:
    from huggingface_hub import HfApi

log = logging.getLogger("runspec.watch")
TAG = "runspec"
LIST_S = 120.0  # the total time an org's listing may take (a page at a time, however slow)
MAX_REPOS = 10_000


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
            out += within(LIST_S, f"listing {target}", partial(_listed, api, target))
        except Exception as exc:  # any client or network fault: the pass cannot see the org
            raise LeaseError(f"cannot list {target}'s runspec repos: {one_line(exc)}") from exc
    return list(dict.fromkeys(out))


def _listed(api: HfApi, org: str) -> list[str]:
    return [m.id for m in islice(api.list_models(author=org, filter=TAG), MAX_REPOS)]


def line(seen: Seen) -> str:
    """The report's line for one repo, every part of it from a lease shown escaped."""
    return printable(_line(seen))


def _line(seen: Seen) -> str:
    if seen.error and seen.verdict in ("error", "unproven"):
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


def watch_all(repos: Sequence[str], opts: WatchOptions) -> list[Seen]:
    """Every repo watched, each lease read once first: an instance that the proven leases of
    two repos claim is ended by neither, and one repo that breaks the watcher is reported and
    skipped, never the end of the pass for the others."""
    first = {repo: read_lease(repo) for repo in repos}
    claims = Counter(c for found in first.values() if (c := _claim(found)) is not None)
    contested = frozenset(c for c, n in claims.items() if n > 1)
    seen = []
    for repo in repos:
        try:
            seen.append(watch_repo(repo, opts, contested=contested, first=first[repo]))
        except Exception as exc:  # one repo's fault, whatever it is: said, and the pass goes on
            log.exception("%s: the watcher failed on it", repo)
            seen.append(Seen(repo, "error", "", error=f"the watcher failed: {one_line(exc)}"))
    return seen


def _claim(found: object) -> tuple[str, str] | None:
    return claim(found.lease) if isinstance(found, Reading) else None


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
        if not repos:  # an org with no run yet, or a misspelt one: never a silent pass
            orgs = ", ".join(printable(t) for t in targets)
            say(
                f"nothing to watch: {orgs} has no model repo tagged {TAG!r} (a run's repo "
                "gets the tag with its first push); check the name, or that the token may see "
                "its private repos"
            )
        seen = watch_all(repos, opts)
    for item in seen:
        say(line(item))
        if item.error or item.verdict == "end":
            kind = "failure" if item.error else "warning"
            alerts.send_and_wait(
                Message(f"watch: {item.verdict}", f"runspec watch: {item.repo}", line(item), kind)
            )
    return seen, not any(s.error for s in seen)
