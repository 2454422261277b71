"""Classification figures from one confusion matrix of counts: exact ratios of counts.

Every accuracy platekit reports (training epoch, validation, test, the per-class table)
is computed here, from integer counts ``confusion[true, predicted]``, so the figures agree
with each other and are ratios of whole numbers: a split all predicted right scores
exactly 1.0, not ``1.0000001`` (a float32 mean of per-class means).
"""

import math

import torch
from torch import Tensor
from torchmetrics import Metric as TorchMetric

ACC = "acc"  # plain accuracy: right predictions / predictions
BALANCED_ACC = "balanced_acc"  # the mean over classes of each class's recall


def ratio_dtype(device: torch.device) -> torch.dtype:
    """float64 for ratios of counts, except where the device has none (Apple's MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def add_predictions(confusion: Tensor, predicted: Tensor, targets: Tensor) -> None:
    """Count each (target, predicted) pair into the flat row-major ``confusion`` in place."""
    num_classes = math.isqrt(confusion.numel())
    cells = torch.add(predicted, targets, alpha=num_classes)  # (B,) flat (true, pred) cell
    # scatter_add_, not bincount: bincount reads the largest index back to the host on CUDA
    confusion.scatter_add_(0, cells, torch.ones_like(cells))


def accuracies(confusion: Tensor) -> dict[str, Tensor]:
    """``acc`` and ``balanced_acc`` of a (C, C) or flat (C*C,) confusion matrix of counts.

    ``acc`` is right predictions over all predictions. ``balanced_acc`` is the mean recall
    over the classes that occur among the targets (scikit-learn's
    ``balanced_accuracy_score``); classes with no samples do not count. Both are 0 when
    nothing was counted.
    """
    counts = square(confusion)
    dtype = ratio_dtype(counts.device)
    hits = counts.diagonal().to(dtype)
    support = counts.sum(dim=1).to(dtype)
    present = support > 0
    recall = hits / support.clamp(min=1)
    return {
        ACC: hits.sum() / support.sum().clamp(min=1),
        BALANCED_ACC: recall[present].sum() / present.sum().clamp(min=1).to(dtype),
    }


def per_class(
    confusion: Tensor, class_names: list[str] | tuple[str, ...]
) -> dict[str, dict[str, float | int]]:
    """Class name -> ``{"precision", "recall", "support"}`` from a confusion matrix.

    Precision is right predictions of the class over predictions of it, recall right ones
    over its samples (``support``); a ratio with nothing to divide by is 0.0, as
    scikit-learn's ``zero_division=0``.
    """
    counts = square(confusion).cpu().to(torch.int64)
    hits = counts.diagonal().tolist()
    support = counts.sum(dim=1).tolist()
    predicted = counts.sum(dim=0).tolist()
    return {
        str(name): {
            "precision": hits[i] / predicted[i] if predicted[i] else 0.0,
            "recall": hits[i] / support[i] if support[i] else 0.0,
            "support": int(support[i]),
        }
        for i, name in enumerate(class_names)
    }


def square(confusion: Tensor) -> Tensor:
    num_classes = math.isqrt(confusion.numel())
    return confusion.reshape(num_classes, num_classes)


class ClassCounts(TorchMetric):
    """A torchmetrics metric: one of :func:`accuracies` over a split, from exact counts.

    Args:
        num_classes: the number of classes.
        figure: ``"acc"`` or ``"balanced_acc"``.
    """

    full_state_update = False
    higher_is_better = True
    is_differentiable = False
    confusion: Tensor  # a registered state

    def __init__(self, num_classes: int, figure: str = ACC) -> None:
        super().__init__()
        if figure not in (ACC, BALANCED_ACC):
            raise ValueError(f"figure={figure!r}: use {ACC!r} or {BALANCED_ACC!r}")
        self.figure = figure
        self.add_state(
            "confusion",
            torch.zeros(num_classes * num_classes, dtype=torch.int64),
            dist_reduce_fx="sum",
        )

    def update(self, outputs: Tensor, targets: Tensor) -> None:
        """Add a batch: ``outputs`` (B, C) logits or (B,) predicted classes, ``targets`` (B,)."""
        predicted = outputs.argmax(dim=1) if outputs.ndim == 2 else outputs
        add_predictions(self.confusion, predicted.long(), targets.long())

    def compute(self) -> Tensor:
        return accuracies(self.confusion)[self.figure]

    @property
    def shape(self) -> tuple[int, int]:
        side = math.isqrt(self.confusion.numel())
        return side, side

    def summed(self) -> Tensor:
        """The flat counts summed over every rank (this rank's own are kept), on the CPU."""
        with self.sync_context():
            return self.confusion.detach().clone().cpu()
