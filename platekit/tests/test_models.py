"""The LightningModule's parts that hold numbers: the per-epoch training statistics."""

import pytest
import torch
from torch.nn import functional as F  # noqa: N812  (torch's own convention)
from torchmetrics.classification import MulticlassAccuracy

from support import module

EpochStats = module("models.epoch_stats").EpochStats


def test_epoch_stats_match_mean_loss_and_torchmetrics_accuracy() -> None:
    generator = torch.Generator().manual_seed(0)
    stats = EpochStats(num_classes=5)
    stats.reset(torch.device("cpu"))
    reference = MulticlassAccuracy(num_classes=5)  # macro average, as val and test use
    loss_sum, seen = 0.0, 0
    for size in (7, 16, 3):
        logits = torch.randn(size, 5, generator=generator)
        targets = torch.randint(0, 4, (size,), generator=generator)  # class 4 is never a target
        loss = F.cross_entropy(logits, targets)
        stats.update(loss, logits, targets)
        reference.update(logits, targets)
        loss_sum, seen = loss_sum + loss.item() * size, seen + size
    mean_loss, accuracy = stats.compute()
    assert mean_loss.item() == pytest.approx(loss_sum / seen, rel=1e-6)
    assert accuracy.item() == pytest.approx(reference.compute().item(), rel=1e-6)


def test_epoch_stats_reset_starts_a_new_epoch() -> None:
    stats = EpochStats(num_classes=3)
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(5.0), torch.eye(3), torch.tensor([0, 1, 2]))
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(1.0), torch.eye(3)[[1, 1]], torch.tensor([1, 0]))
    mean_loss, accuracy = stats.compute()
    assert mean_loss.item() == pytest.approx(1.0)
    assert accuracy.item() == pytest.approx(0.5)  # class 1 all right, class 0 all wrong
