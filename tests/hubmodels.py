"""The local Hub's model listing (`GET /api/models`): what `HfApi.list_models(author=...,
filter=...)` asks, answered from the repos' heads. A model's tags are its card's front matter
`tags:` (and its `library_name`), as on the Hub."""

from __future__ import annotations

from typing import Any

import yaml

from tests.hubrepo import Repo


def card_tags(repo: Repo) -> list[str]:
    entry = repo.head.get("README.md")
    text = (entry.data or b"").decode("utf-8", "replace") if entry is not None else ""
    if not text.startswith("---\n") or "\n---" not in text[4:]:
        return []
    try:
        front = yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}
    except yaml.YAMLError:
        return []
    tags = [str(t) for t in front.get("tags") or []]
    return tags + ([str(front["library_name"])] if front.get("library_name") else [])


def list_models(repos: dict[tuple[str, str], Repo], query: dict[str, list[str]]) -> list[Any]:
    author = (query.get("author") or [None])[0]
    wanted = set(query.get("filter") or [])
    out = []
    for (rtype, repo_id), repo in sorted(repos.items()):
        if rtype != "model" or (author is not None and repo_id.split("/")[0] != author):
            continue
        tags = card_tags(repo)
        if not wanted <= set(tags):
            continue
        out.append(
            {
                "_id": repo_id, "id": repo_id, "modelId": repo_id, "sha": repo.sha,
                "tags": tags, "private": repo.private,
                "lastModified": "2026-01-01T00:00:00.000Z",
            }
        )  # fmt: skip
    return out
