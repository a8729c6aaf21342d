"""The engines that rent and tear down machines (SkyPilot, dstack, Hugging Face Jobs).

The engine owns the machines; runspec owns "done". These modules write what each engine takes
(a task file, a job request) from a validated Spec; they import only the spec below them.
"""
