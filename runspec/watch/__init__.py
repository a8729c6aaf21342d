"""The off-box dead-man's switch: the lease a live run renews in its Hub repo, the judgement a
watcher elsewhere makes of it, and the provider call that ends a box that stopped vouching."""
