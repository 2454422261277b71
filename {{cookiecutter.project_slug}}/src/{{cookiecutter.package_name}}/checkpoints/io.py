"""Checkpoints: safe loading (tensors and plain containers only), atomic writes, weights.

``load_checkpoint`` is the one place that turns a missing, broken, unsafe or foreign
checkpoint into a UserError; every entry point loads through it.
"""

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch import nn

from ..cli.errors import UserError, first_line
from ..runtime.files import write_atomic

LISTED_KEYS = 10  # how many key names an error message lists


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a Lightning checkpoint with ``weights_only=True``.

    Raises:
        UserError: the file is missing, is not a checkpoint, is truncated, or carries
            pickled code.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint '{path}' does not exist; pass an existing .ckpt file")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a cut one is not
        raise UserError(
            f"checkpoint '{path}' is not a readable PyTorch checkpoint (truncated or corrupt: "
            "not a complete torch.save archive); use another checkpoint or retrain"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(
            f"checkpoint '{path}' holds objects other than tensors and plain containers "
            f"and was refused for safety ({_unsafe_reason(error)}); load only checkpoints "
            "written by this project"
        ) from error
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as error:
        raise UserError(
            f"checkpoint '{path}' is not a readable PyTorch checkpoint (truncated or "
            f"corrupt: {first_line(error)}); use another checkpoint or retrain"
        ) from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(
            f"checkpoint '{path}' has no 'state_dict'; pass a checkpoint written by training"
        )
    return checkpoint


def load_weights(
    model: nn.Module, checkpoint: dict[str, Any], path: str | Path, *, strict: bool = True
) -> dict[str, list[str]]:
    """Load the checkpoint's ``state_dict`` into ``model``; return the keys that did not fit.

    ``strict``: every key must match in name and shape, else a UserError says which do not.
    Not strict: matching keys load, the rest are left as they are and returned under
    ``missing``, ``unexpected`` and ``mismatched`` (shape differs).
    """
    state = checkpoint["state_dict"]
    own = model.state_dict()
    mismatched = [k for k, v in state.items() if k in own and own[k].shape != v.shape]
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if strict and (mismatched or missing or unexpected):
        raise UserError(
            f"checkpoint '{path}' does not fit this model's architecture "
            f"({_describe(missing, unexpected, mismatched)}); pass a checkpoint of the same "
            "model config, or init_strict=false to load only the weights that fit"
        )
    model.load_state_dict({k: v for k, v in state.items() if k not in mismatched}, strict=False)
    return {"missing": missing, "unexpected": unexpected, "mismatched": mismatched}


class SafeCheckpointIO(TorchCheckpointIO):
    """Write checkpoints atomically (temporary file, then rename); load with weights_only.

    A run killed mid-write leaves the previous file of that name intact.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        parent = super()
        write_atomic(
            Path(path), lambda tmp: parent.save_checkpoint(checkpoint, tmp, storage_options)
        )

    def load_checkpoint(
        self, path: Any, map_location: Any = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        return load_checkpoint(path)


def _describe(missing: list[str], unexpected: list[str], mismatched: list[str]) -> str:
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape", mismatched)):
        if keys:
            shown = ", ".join(keys[:LISTED_KEYS])
            more = f" and {len(keys) - LISTED_KEYS} more" if len(keys) > LISTED_KEYS else ""
            parts.append(f"{label}: {shown}{more}")
    return "; ".join(parts)


def _unsafe_reason(error: BaseException) -> str:
    """The line of torch's weights-only error that names the refused object."""
    lines = [line.strip() for line in str(error).splitlines()]
    named = [line for line in lines if "Unsupported global" in line]
    return (named or [first_line(error)])[0].rstrip(".")
