"""Verified pushes of a run's checkpoints and files to the Hub or a mounted folder.

Light to import: huggingface_hub is imported only when a Hub target works. The kinds of target
are listed in runspec.push.targets.
"""

from runspec.push.base import PushFailed, PushTarget, StagedFile
from runspec.push.dirtarget import DirTarget
from runspec.push.hub import HubTarget
from runspec.push.pusher import Pusher
from runspec.push.targets import make_target

__all__ = [
    "DirTarget",
    "HubTarget",
    "PushFailed",
    "PushTarget",
    "Pusher",
    "StagedFile",
    "make_target",
]
