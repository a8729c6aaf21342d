"""`python -m runspec.trainer --job JOB_JSON`: the trainer child, runspec.trainer.child.

The trainer's unit and the launcher's identity check name `runspec.trainer`: that stays its
command line.
"""

import sys

from runspec.trainer.child import main  # torch, torchvision and LibreYOLO come when it trains

if __name__ == "__main__":
    sys.exit(main())
