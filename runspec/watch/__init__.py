"""The off-box dead-man's switch: the lease a live run renews in its Hub repo, the judgement a
watcher elsewhere makes of it, and the provider call that ends a box that stopped vouching."""

# The watcher's --notify URLs as one variable (space-separated): how the HF scheduled job that
# runs it (runspec.watch.install) gets them, as a secret, never in its command.
NOTIFY_VARIABLE = "RUNSPEC_WATCH_NOTIFY"
