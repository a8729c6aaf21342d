"""The failsafe's address before issue 20's move, kept for the timers and watchers armed by
an older runspec, which call it by this name. The program is runspec.machine.failsafe; new
timers call that.
"""

import sys

from runspec.machine.failsafe import main

if __name__ == "__main__":
    sys.exit(main())
