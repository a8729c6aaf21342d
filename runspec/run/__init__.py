"""One run's lifecycle, shared by `runspec run` and the daemon: accepting a spec, preflight,
staging, supervising the trainer, the final push and the hand-over to the machine's end.
"""
