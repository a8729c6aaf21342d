from runspec.cli import entrypoint

entrypoint()
