"""Importing torch, torchvision and LibreYOLO at a child's start, for less CPU.

Every trainer, rank and preflight child pays these imports (2.9 s of CPU on this machine); two
things inside them do no work the child needs (bench/bench_child_start.py measures both):

- The cyclic garbage collector. The imports make about half a million Python objects, and the
  collector walks them each time a generation fills: 789 collections, 0.5 s of CPU. The modules
  live as long as the process, so their cycles need no looking for; the few the imports left
  unreachable stay frozen with them. Frozen afterwards, they are never walked again.
- TorchDynamo. torchvision's `ops.roi_align` imports `is_compile_supported` from
  `torch._dynamo.utils` at import time, which imports all of torch.compile's machinery (sympy,
  the symbolic shapes, the bytecode tracer): 1.0 s of CPU for a function roi_align calls only
  inside torch.compile. While the imports run, a stand-in for that module answers the one name
  with a function that imports the real module when it is first called; any other name loads
  the real module at once. Afterwards the stand-in is gone: `import torch._dynamo` and
  `torch.compile` (LibreYOLO's `compile=True`) load the real thing, as they would have.
  The preflight child never needs it; a trainer loads it later anyway (torch.optim's
  `add_param_group` imports it at its first call, and so does `libreyolo.models` through
  torchvision's tv_tensors), so there the stand-in saves nothing and costs nothing.

Only imports go inside: a check or a training step run inside would have its garbage frozen
too, never freed.
"""

from __future__ import annotations

import gc
import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFERRED = "torch._dynamo.utils"


def _real_dynamo_utils() -> types.ModuleType:
    if isinstance(sys.modules.get(DEFERRED), _DeferredDynamoUtils):
        del sys.modules[DEFERRED]
    return importlib.import_module(DEFERRED)


def is_compile_supported(device_type: Any) -> Any:
    """What torchvision's roi_align holds in place of TorchDynamo's function of that name."""
    return _real_dynamo_utils().is_compile_supported(device_type)


class _DeferredDynamoUtils(types.ModuleType):
    """sys.modules' `torch._dynamo.utils` while the heavy imports run."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks for __path__ and the like: a module
            raise AttributeError(name)
        if name == "is_compile_supported":
            return is_compile_supported
        return getattr(_real_dynamo_utils(), name)


@contextmanager
def heavy_imports() -> Iterator[None]:
    """Around the imports of a child's heavy libraries. Afterwards the collector is back (as it
    was), with everything made meanwhile frozen out of its way, and the stand-in is gone."""
    was_enabled = gc.isenabled()
    gc.disable()
    stand_in = None
    if DEFERRED not in sys.modules:
        stand_in = sys.modules[DEFERRED] = _DeferredDynamoUtils(DEFERRED)
    try:
        yield
    finally:
        if stand_in is not None and sys.modules.get(DEFERRED) is stand_in:
            del sys.modules[DEFERRED]
        gc.freeze()
        if was_enabled:
            gc.enable()
