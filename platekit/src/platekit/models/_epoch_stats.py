"""Training loss and accuracies over an epoch, accumulated on the device without host syncs."""

from collections.abc import Callable

import torch
from torch import Tensor

from platekit.models._class_counts import accuracies, add_predictions

Reduce = Callable[[Tensor], Tensor]


class EpochStats:
    """Sum of losses and a confusion matrix, added to on every step, read once per epoch.

    ``update`` only queues tensor ops on the batch's device: reading a value (``.item()``,
    ``float()``) or logging through Lightning on every step would stall or slow each step.
    The accuracies are exact ratios of the counts (``class_counts.py``). The sums are a
    checkpoint's too (:meth:`state_dict`), so an epoch interrupted and resumed reports
    the figures of all its steps.
    """

    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.loss_sum = torch.zeros(())
        self.confusion = torch.zeros(num_classes * num_classes, dtype=torch.int64)

    def reset(self, device: torch.device) -> None:
        self.loss_sum = torch.zeros((), device=device)
        self.confusion = torch.zeros(self.num_classes**2, dtype=torch.int64, device=device)

    def update(self, loss: Tensor, logits: Tensor, targets: Tensor) -> None:
        """Add one batch: its mean ``loss``, ``logits`` (B, C) and ``targets`` (B,)."""
        self.loss_sum.add_(loss.detach(), alpha=len(targets))
        add_predictions(self.confusion, logits.detach().argmax(dim=1), targets)

    def compute(self, sum_over_ranks: Reduce | None = None) -> dict[str, Tensor]:
        """``loss`` (mean), ``acc`` and ``balanced_acc`` of what was added since the last reset.

        Args:
            sum_over_ranks: adds a tensor up across processes (DDP); by default the
                figures are this process's own.
        """
        total = sum_over_ranks or (lambda tensor: tensor)
        loss_sum = total(self.loss_sum)
        confusion = total(self.confusion)
        samples = confusion.sum().clamp(min=1)
        return {"loss": loss_sum / samples, **accuracies(confusion)}

    def state_dict(self) -> dict[str, Tensor]:
        """The running sums, on the CPU (for a checkpoint)."""
        return {"loss_sum": self.loss_sum.cpu(), "confusion": self.confusion.cpu()}

    def load_state_dict(self, state: dict[str, Tensor], device: torch.device) -> None:
        """Continue from sums :meth:`state_dict` returned, on ``device``."""
        self.loss_sum = state["loss_sum"].to(device=device, dtype=torch.float32).clone()
        self.confusion = state["confusion"].to(device=device, dtype=torch.int64).clone()
