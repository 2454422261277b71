"""Stop a run the moment its loss stops being a number."""

from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer
from torch import Tensor

from ..utils.errors import UserError


class FiniteLoss(Callback):
    """Raise a UserError naming the step and batch when the training loss is NaN or Inf.

    The check runs before the backward pass, so the weights are never updated with it.
    """

    def __init__(self) -> None:
        self._batch_idx = 0

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._batch_idx = batch_idx

    def on_before_backward(
        self, trainer: Trainer, pl_module: LightningModule, loss: Tensor
    ) -> None:
        if not torch.isfinite(loss).all():
            raise UserError(
                f"training loss is {loss.item()} at step {trainer.global_step} (epoch "
                f"{trainer.current_epoch}, batch {self._batch_idx}); lower model.optimizer.lr, "
                "or check the data for NaN/Inf and extreme values"
            )
