"""Verified pushes of a run's checkpoints and files to the Hub or a mounted folder.

Light to import: huggingface_hub is imported only when a Hub target pushes.
"""

from runspec.push.base import PushFailed, PushTarget, StagedFile
from runspec.push.pusher import Pusher, make_target

__all__ = ["PushFailed", "PushTarget", "Pusher", "StagedFile", "make_target"]
