"""The `notify:` URLs, checked before the run: a word that cannot go out is found at hour 0,
not when the budget stops the run and nobody hears of it.

Checked in the parent (as the finish is): `${NAME}` is read from the environment the messages
will go out from, which the preflight child does not get. Only a URL's scheme and a host that
is a domain name or an address are shown: apprise puts tokens in the host's place too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

from runspec.alerts import expand
from runspec.checkresult import CheckResult, failed, passed

_ENV_FIX = (
    "set it in /etc/runspec/env (the daemon's environment) or in the environment of "
    "`runspec run`, or fix the notify: URL"
)


def _shown(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" if "." in host or host == "localhost" else parts.scheme


def notify_checks(urls: tuple[str, ...] | None, environ: Mapping[str, str]) -> list[CheckResult]:
    """One check per URL of the spec's `notify:`; none when the spec names none."""
    if not urls:
        return []
    import apprise

    # apprise logs the URL it could not read, tokens included; the check says it instead.
    logging.getLogger("apprise").propagate = False
    results = []
    for number, written in enumerate(urls, start=1):
        target = expand(written, environ)
        if target.url is None:
            names = ", ".join(f"${{{n}}}" for n in target.missing)
            results.append(failed("notify", f"notify URL {number}: {names} is not set", _ENV_FIX))
        elif apprise.Apprise.instantiate(target.url) is None:
            results.append(
                failed(
                    "notify",
                    f"notify URL {number} ({target.scheme}:): apprise cannot read it (an "
                    "unknown scheme, or a URL its service does not accept)",
                    "write it as the service's page on github.com/caronc/apprise/wiki says",
                )
            )
        else:
            results.append(passed("notify", f"notify URL {number}: {_shown(target.url)}"))
    return results
