"""Stop a run the moment its loss stops being a number."""

import torch
from lightning import Callback, LightningModule, Trainer
from torch import Tensor

from platekit._errors import UserError


class FiniteLoss(Callback):
    """Raise a UserError naming the step and batch when the training loss is NaN or Inf.

    The check runs before the backward pass, so the weights are never updated with it.
    """

    def on_before_backward(
        self, trainer: Trainer, pl_module: LightningModule, loss: Tensor
    ) -> None:
        if not torch.isfinite(loss).all():
            raise UserError(
                f"training loss is {loss.item()} at step {trainer.global_step} (epoch "
                f"{trainer.current_epoch}, batch {trainer.fit_loop.epoch_loop.batch_idx}); "
                "lower optimizer.lr, or check the data for NaN/Inf and extreme values"
            )
