"""Checkpoints that name what rebuilds them, load without running code, and refuse a
changed or broken file in one line. Names are imported on first use."""

from typing import TYPE_CHECKING

from platekit._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them, imported eagerly
    from platekit.checkpoints._io import SafeCheckpointIO as SafeCheckpointIO
    from platekit.checkpoints._restore import Checkpoint as Checkpoint

EXPORTS = {"Checkpoint": "._restore", "SafeCheckpointIO": "._io"}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
