"""Secrets written out in a URL: a notification webhook's token, an install URL's login.

A spec and an `--install` reference are copied whole where no secret may go: an engine's
exported task, an HF job's description, git, the Hub's copy of the spec. The secret part of
such a URL is written as `${NAME}` and read from the environment where the URL is used.

apprise's URLs carry their tokens in every part (its plugins' `templates`): in the host
(`tgram://BOTTOKEN/CHAT`, `discord://ID/TOKEN`, `pover://USER@TOKEN`), in the path
(`https://hooks.slack.com/services/T/B/TOKEN`), in the user and password, in the query
(`?token=`, `?apikey=`). A part that is not `${NAME}` is refused when it looks like a token:
16 or more URL-safe characters mixing letters and digits or both cases, as generated tokens
do (Slack's 24, a Telegram bot's 35 after its id, Discord's 68) and words, topics, numeric
ids and dotted host names do not; and any written password, or value of a query key that
names a secret, whatever it looks like.
"""

from __future__ import annotations

import re

REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
TOKEN_MIN = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# The query keys apprise's plugins take a secret under (token, apikey, key, secret, pass...).
_SECRET_KEY = re.compile(r"token|key|secret|pass|pwd|auth|sig|webhook", re.IGNORECASE)


def names(text: str) -> list[str]:
    """The `${NAME}`s a URL takes from the environment, each once, in order."""
    return list(dict.fromkeys(REF.findall(text)))


def _token_like(part: str) -> bool:
    if len(part) < TOKEN_MIN or not _TOKEN_CHARS.fullmatch(part):
        return False
    kinds = [any(c.islower() for c in part), any(c.isupper() for c in part)]
    kinds.append(any(c.isdigit() for c in part))
    return sum(kinds) >= 2


def _written(part: str) -> bool:
    """Something other than `${NAME}`s is written in this part."""
    return bool(REF.sub("", part))


def _userinfo(address: str) -> tuple[str | None, str]:
    """(the part before the last @ of the address, the rest); (None, address) without one."""
    head, at, rest = address.rpartition("@")
    return (head, rest) if at else (None, address)


def written_secret(url: str) -> str | None:
    """What in `url` is a secret written out, as a phrase ("a password", "a token in its
    path"), never the secret itself; None when every secret in it is a `${NAME}`."""
    rest = _SCHEME.sub("", url, count=1)
    before_query, _, query = rest.partition("?")
    address, _, path = before_query.partition("/")
    user, host = _userinfo(address)
    if user is not None:
        _, colon, password = user.partition(":")
        if colon and _written(password):
            return "a password"
        if any(_token_like(p) for p in REF.sub("", user).split(":")):
            return "a token in its user name"
    if any(_token_like(p) for p in re.split(r"[:#]", REF.sub("", host))):
        return "a token in its address"
    if any(_token_like(p) for p in re.split(r"[/:@#,]", REF.sub("", path))):
        return "a token in its path"
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        value = value.partition("#")[0]
        if _written(value) and (_SECRET_KEY.search(key) or _token_like(REF.sub("", value))):
            return f"a secret in its {key or 'query'}= parameter"
    return None


def login_in(requirement: str) -> bool:
    """The URL in a requirement (`name @ git+https://...`) carries a login written out
    (`user@`, `user:password@`, `TOKEN@`): an install URL's login is always a secret (GitHub
    takes a token as the user name)."""
    found = re.search(r"://([^/?#\s]*)", requirement)
    user = None if found is None else _userinfo(found.group(1))[0]
    return user is not None and _written(user)
