"""Every kind of push target, by the `push:` key it answers to: one explicit tuple, so which
targets exist is read here, not gathered from whatever modules happened to be imported.
"""

from __future__ import annotations

from runspec.push.base import PushFailed, PushTarget
from runspec.push.dirtarget import DirTarget
from runspec.push.hub import HubTarget
from runspec.spec.model import PushSpec, Spec
from runspec.store.paths import RunPaths

TARGETS: tuple[type[PushTarget], ...] = (HubTarget, DirTarget)


def kind_of(push: PushSpec) -> type[PushTarget]:
    """The target class the push section names."""
    for kind in TARGETS:
        if getattr(push, kind.key, None) is not None:
            return kind
    raise PushFailed(f"the push section names no target ({', '.join(k.key for k in TARGETS)})")


def make_target(spec: Spec, paths: RunPaths) -> PushTarget:
    """The target a run's spec pushes to."""
    assert spec.push is not None
    return kind_of(spec.push).from_spec(spec, paths)
