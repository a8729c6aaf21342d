"""How runspec starts a Python child of its own: isolated (`-I`: no PYTHON* variables, no user
site, and no current folder on sys.path) with runspec's code named explicitly.

`python -m runspec` in a folder that holds a folder named `runspec` (the folder above an
editable checkout, or `/etc` after `runspec install`) imports that folder instead of runspec;
every child runspec starts goes through here, whatever the caller's folder.
"""

from __future__ import annotations

from pathlib import Path

_BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv[1]); module = sys.argv[2]; "
    "sys.argv = [module, *sys.argv[3:]]; "
    # alter_sys: `__main__` is the module, as with -m, so DDP's spawned ranks can import it.
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)
RUNSPEC_CODE = str(Path(__file__).resolve().parent.parent)


def isolated(python: str, module: str, *args: str) -> list[str]:
    """The command that runs `python -m module args` isolated, with runspec's code explicit."""
    return [python, "-I", "-c", _BOOT, RUNSPEC_CODE, module, *args]
