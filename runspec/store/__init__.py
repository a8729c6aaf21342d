"""The state folder: its layout (paths), the run records and their one writer (owner), file locks,
atomic writes, and room on disk.
"""
