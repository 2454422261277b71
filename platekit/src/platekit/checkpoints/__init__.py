"""Checkpoints that name what rebuilds them, load without running code, and refuse a
changed or broken file in one line."""

from platekit.checkpoints._io import SafeCheckpointIO
from platekit.checkpoints._restore import Checkpoint

__all__ = ["Checkpoint", "SafeCheckpointIO"]
