"""Config checks and Hydra helpers: no torch, no Lightning (a mistyped value is refused
before they are imported)."""

from platekit.config._early import check_command_line

__all__ = ["check_command_line"]
