"""The children import torch without the cyclic collector and get it back afterwards."""

from __future__ import annotations

import subprocess
import sys

_PRELUDE = "import gc\nfrom runspec.trainer.heavyimports import without_collector\n"


def _run(code: str) -> list[str]:
    """`code` in a fresh interpreter (the collector's state is per process); its output words."""
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_the_collector_is_back_after_the_imports_and_what_they_made_is_frozen() -> None:
    assert _run(
        "before = gc.get_freeze_count()\n"
        "with without_collector():\n"
        "    assert not gc.isenabled()\n"
        "    import json, email.parser, http.client\n"
        "    made = [[i] for i in range(1000)]\n"
        "print(gc.isenabled(), gc.get_freeze_count() - before >= 1000)\n"
    ) == ["True", "True"]


def test_a_collector_that_was_off_stays_off() -> None:
    assert _run("gc.disable()\nwith without_collector():\n    pass\nprint(gc.isenabled())\n") == [
        "False"
    ]


def test_the_collector_is_back_when_an_import_fails() -> None:
    assert _run(
        "try:\n"
        "    with without_collector():\n"
        "        import no_such_module_here\n"
        "except ImportError:\n"
        "    print(gc.isenabled())\n"
    ) == ["True"]
