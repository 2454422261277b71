"""Training loss and accuracy over an epoch, accumulated on the device without host syncs."""

from collections.abc import Callable

import torch
from torch import Tensor

Reduce = Callable[[Tensor], Tensor]


class EpochStats:
    """Sum of losses and a confusion matrix, added to on every step, read once per epoch.

    ``update`` only queues tensor ops on the batch's device: reading a value (``.item()``,
    ``float()``) or logging through Lightning on every step would stall or slow each step.
    Accuracy is macro-averaged like ``torchmetrics``' ``MulticlassAccuracy``: the mean
    over classes of the share of each class's samples predicted right.
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
        # (B,) cell of each sample in the row-major (true, predicted) matrix
        cells = torch.add(logits.detach().argmax(dim=1), targets, alpha=self.num_classes)
        # scatter_add_, not bincount: bincount reads the largest index back to the host on CUDA
        self.confusion.scatter_add_(0, cells, torch.ones_like(cells))

    def compute(self, sum_over_ranks: Reduce | None = None) -> tuple[Tensor, Tensor]:
        """Mean loss and macro accuracy of what was added since the last reset.

        Args:
            sum_over_ranks: adds a tensor up across processes (DDP); by default the
                figures are this process's own.
        """
        total = sum_over_ranks or (lambda tensor: tensor)
        loss_sum = total(self.loss_sum)
        confusion = total(self.confusion).view(self.num_classes, self.num_classes)  # (true, pred)
        hits = confusion.diagonal()
        actual, predicted = confusion.sum(dim=1), confusion.sum(dim=0)
        loss = loss_sum / actual.sum().clamp(min=1)
        recall = hits / actual.clamp(min=1)
        # classes never seen nor predicted do not count; like torchmetrics' macro average
        counted = (actual + predicted) > 0
        accuracy = (recall * counted).sum() / counted.sum().clamp(min=1)
        return loss, accuracy
