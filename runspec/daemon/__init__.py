"""runspecd: the light, long-lived daemon around the lifecycle.

It watches the inbox, keeps the queue, talks to systemd and runs one `Lifecycle` at a time in a
worker thread. It never imports torch or libreyolo: everything heavy runs in child programs.
"""
