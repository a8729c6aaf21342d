"""What a dataset repo holds, said when the file a spec names is not there: the fix then reads
"it holds ds/train.tar, ds/val.tar" instead of sending the user to the Hub's Files tab.

The names are the Hub's answer, so they are read as untrusted data: a bounded number of them,
each cut short and made printable, and a listing that fails or stalls says nothing.
"""

from __future__ import annotations

import os

from runspec.hubreach import endpoint_set
from runspec.printable import printable
from runspec.spec.model import HubDataset

SHOWN = 10  # names in the line
READ_AT_MOST = 500  # entries of the listing read (the client pages through the tree)
NAME_CHARS = 120


def repo_files(hub: HubDataset) -> str:
    """The repo's files for the fix line, "; it holds a.tar, b.tar (and N more)"; "" when the
    listing cannot be read (the message without it still names the file it looked for)."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint_set(), token=os.environ.get("HF_TOKEN") or None)
    found: list[str] = []
    try:
        tree = api.list_repo_tree(
            hub.repo, repo_type="dataset", revision=hub.revision, recursive=True
        )
        for count, entry in enumerate(tree):
            if count >= READ_AT_MOST:
                break
            if isinstance(entry, RepoFile) and not entry.path.startswith("."):
                found.append(printable(entry.path[:NAME_CHARS]))
    except Exception:  # a listing is a courtesy: the refusal stands without it
        return ""
    if not found:
        return "; the repo holds no files"
    found.sort()
    more = len(found) - SHOWN
    rest = f" (and {more}{'+' if len(found) >= READ_AT_MOST else ''} more)" if more > 0 else ""
    return f"; it holds {', '.join(found[:SHOWN])}{rest}"
