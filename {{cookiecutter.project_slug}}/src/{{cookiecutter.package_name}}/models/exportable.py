"""The model as shipped: raw inputs in, logits and probabilities out.

Training sees inputs normalised with the train split's mean and std. The shipped model
applies that normalisation itself, so a user feeds the same raw inputs the data module's
``load_raw()`` yields (for digits: float32 pixels divided by 16, in [0, 1]).
"""

from typing import Any

import torch
from hydra.utils import get_class
from omegaconf import DictConfig
from torch import Tensor, nn

from ..checkpoints.io import restore_model
from ..cli.errors import UserError

INPUT_NAME = "images"
OUTPUT_NAMES = ("logits", "probabilities")


class RawInputClassifier(nn.Module):
    """``net`` behind a fixed ``(x - mean) / std``, with a softmax beside the logits."""

    def __init__(self, net: nn.Module, mean: float, std: float) -> None:
        super().__init__()
        self.net = net
        # Buffers, not Python floats, so they are constants in the exported graph.
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor]:
        # images: (B, C, H, W) raw -> logits, probabilities: (B, num_classes)
        logits = self.net((images - self.mean) / self.std)
        return logits, logits.softmax(dim=-1)


def normalisation(checkpoint: dict[str, Any], data_class: type, path: str) -> tuple[float, float]:
    """The train split's ``(mean, std)`` that Lightning saved from the data module's state.

    Lightning stores ``datamodule.state_dict()`` under the data module's class name.
    """
    state = checkpoint.get(data_class.__qualname__)
    if not isinstance(state, dict) or not {"mean", "std"} <= state.keys():
        raise UserError(
            f"checkpoint '{path}' has no normalisation statistics under "
            f"'{data_class.__qualname__}'; pass a checkpoint written by training with that "
            "data module (data=...)"
        )
    return float(state["mean"]), float(state["std"])


def from_checkpoint(
    cfg: DictConfig, checkpoint: dict[str, Any], path: str, data_class: type
) -> RawInputClassifier:
    """The checkpoint's net with its normalisation baked in, in eval mode on CPU."""
    model = restore_model(get_class(cfg.model._target_), checkpoint, path)
    mean, std = normalisation(checkpoint, data_class, path)
    return RawInputClassifier(model.net, mean, std).eval()
