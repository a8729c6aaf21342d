"""The local Hub's model listing, as much as `HfApi.list_models(author=, filter=)` needs:
GET /api/models answers the model repos of `author` whose README.md front matter lists every
`filter` tag, in one page. A minimal stand-in for the watcher's ORG mode (issue 22)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from tests.hubhandler import Handler


def route(handler: Handler, method: str, path: str) -> tuple[str, Callable[[], None]] | None:
    if method == "GET" and path == "/api/models":
        return "list_models", lambda: _list(handler)
    return None


def _tags(readme: bytes | None) -> list[str]:
    text = (readme or b"").decode("utf-8", "replace")
    if not text.startswith("---\n"):
        return []
    try:
        meta = yaml.safe_load(text[4:].split("\n---", 1)[0])
    except yaml.YAMLError:
        return []
    tags = meta.get("tags") if isinstance(meta, dict) else None
    return [str(t) for t in tags] if isinstance(tags, list) else []


def _list(handler: Handler) -> None:
    query = handler._query
    author = (query.get("author") or [""])[0]
    wanted = set(query.get("filter") or [])
    found = []
    with handler.hub._lock:
        repos = [r for (kind, _), r in handler.hub.repos.items() if kind == "model"]
    for repo in repos:
        if author and not repo.repo_id.startswith(f"{author}/"):
            continue
        entry = repo.head.get("README.md")
        tags = _tags(entry.data if entry is not None else None)
        if wanted <= set(tags):
            found.append({"id": repo.repo_id, "modelId": repo.repo_id, "tags": tags,
                          "private": repo.private})  # fmt: skip
    handler._json(200, found)
