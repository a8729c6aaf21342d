"""Importing torch, torchvision and LibreYOLO without the cyclic garbage collector.

Those imports make about half a million Python objects, and the collector walks them each time
a generation fills: 789 collections while `import torch, torchvision, libreyolo` runs, 0.5 s of
its 3.7 s of CPU on this machine (bench/bench_child_start.py), paid by every trainer and
preflight child at its start. The modules live as long as the process, so their cycles need
no looking for; the few the imports left unreachable (9,351 objects here) stay frozen with
them. Frozen afterwards, they are never walked again: the collector then looks only at what
training makes. Only imports go inside: a check or a training step run inside would have its
garbage frozen too, never freed.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_collector() -> Iterator[None]:
    """Around the imports of a child's heavy libraries; the collector is back afterwards (as
    it was), with everything made meanwhile frozen out of its way."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
