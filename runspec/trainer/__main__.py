"""`python -m runspec.trainer --job JOB_JSON`: the trainer child, runspec.trainer.child.

The trainer's unit and the launcher's identity check name `runspec.trainer`: that stays its
command line.
"""

import sys

from runspec.trainer.heavyimports import heavy_imports

with heavy_imports():  # torch, torchvision and LibreYOLO, through the child
    from runspec.trainer.child import main

if __name__ == "__main__":
    sys.exit(main())
