"""The engines that rent and tear down machines (SkyPilot, dstack, Hugging Face Jobs).

The engine owns the machines; runspec owns "done". The export and launch modules write what each
engine takes (a task file, a job request) from a validated Spec; the on-box modules (onbox,
nodes) are what `runspec run` does when it runs under one.
"""
