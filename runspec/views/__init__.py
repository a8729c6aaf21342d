"""What people read about runs: status rows, the systemd status line, the closing summary.

Read-only views of records and run folders; never the network, never torch.
"""
