"""Load checkpoints safely: tensors and plain containers only, no pickled code."""

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class
from lightning import LightningModule
from omegaconf import DictConfig

from .errors import UserError


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a Lightning checkpoint with ``weights_only=True``.

    Raises:
        UserError: the file is missing, is not a checkpoint, is truncated, or carries
            pickled code.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint '{path}' does not exist; pass an existing .ckpt file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(
            f"checkpoint '{path}' holds objects other than tensors and plain containers "
            f"and was refused for safety ({_first_line(error)}); load only checkpoints "
            "written by this project"
        ) from error
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as error:
        raise UserError(
            f"checkpoint '{path}' is not a readable PyTorch checkpoint (truncated or "
            f"corrupt: {_first_line(error)}); use another checkpoint or retrain"
        ) from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(
            f"checkpoint '{path}' has no 'state_dict'; pass a checkpoint written by training"
        )
    return checkpoint


def restore_model(cfg: DictConfig, checkpoint: dict[str, Any], path: str) -> LightningModule:
    """Rebuild the model from the checkpoint's own hyperparameters and load its weights."""
    model_class = get_class(cfg.model._target_)
    try:
        model = model_class(**checkpoint["hyper_parameters"])
        model.load_state_dict(checkpoint["state_dict"])
    except (KeyError, TypeError, RuntimeError) as error:
        raise UserError(
            f"checkpoint '{path}' does not fit model {cfg.model._target_} "
            f"({_first_detail(error)}); "
            "pass a checkpoint trained with this model"
        ) from error
    return model


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _first_detail(error: BaseException) -> str:
    """The first line that says what is wrong, skipping headers such as 'Error(s) in ...:'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next((line for line in lines if not line.endswith(":")), _first_line(error))
