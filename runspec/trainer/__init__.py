"""Training: the trainer child (`python -m runspec.trainer`), the contract between it and the
parent (control), and the parent's side that starts it (launcher, the systemd unit), watches it
(observer) and reads its checkpoints and curves.
"""
