"""The LightningModule's parts that hold numbers: training statistics, accuracies from counts."""

from fractions import Fraction
from typing import Any

import pytest
import torch
from torch.nn import functional as F  # noqa: N812  (torch's own convention)
from torchmetrics.functional.classification import (
    multiclass_accuracy,
    multiclass_precision,
    multiclass_recall,
)

from support import module

EpochStats = module("models._epoch_stats").EpochStats


def test_epoch_stats_match_mean_loss_and_torchmetrics_accuracies() -> None:
    generator = torch.Generator().manual_seed(0)
    stats = EpochStats(num_classes=5)
    stats.reset(torch.device("cpu"))
    loss_sum, seen, predicted, actual = 0.0, 0, [], []
    for size in (7, 16, 3):
        logits = torch.randn(size, 5, generator=generator)
        targets = torch.randint(0, 4, (size,), generator=generator)  # class 4 is never a target
        loss = F.cross_entropy(logits, targets)
        stats.update(loss, logits, targets)
        loss_sum, seen = loss_sum + loss.item() * size, seen + size
        predicted += logits.argmax(1).tolist()
        actual += targets.tolist()
    figures = stats.compute()
    assert figures["loss"].item() == pytest.approx(loss_sum / seen, rel=1e-6)
    hits = sum(p == a for p, a in zip(predicted, actual, strict=True))
    assert figures["acc"].item() == hits / seen  # exact: the ratio of the counts
    preds, target = torch.tensor(predicted), torch.tensor(actual)
    # balanced accuracy: the mean recall over the classes that occur among the targets
    recalls = multiclass_recall(preds, target, num_classes=5, average=None).double()
    occurring = torch.bincount(target, minlength=5) > 0
    assert figures["balanced_acc"].item() == pytest.approx(
        recalls[occurring].mean().item(), abs=1e-7
    )
    accuracy = multiclass_accuracy(preds, target, num_classes=5, average="micro")
    assert figures["acc"].item() == pytest.approx(accuracy.item(), abs=1e-7)


def test_accuracies_are_exact_ratios_of_counts() -> None:
    """All right is exactly 1.0 (a float32 mean of recalls gave 1.0000001192092896)."""
    counts = module("models._class_counts")
    every_class_right = torch.diag(torch.tensor([3, 7, 11, 13, 17, 19, 23]))
    assert counts.accuracies(every_class_right) == {"acc": 1.0, "balanced_acc": 1.0}
    confusion = torch.tensor([[260, 10], [3, 0]])  # class 1: 3 samples, none right
    figures = {name: value.item() for name, value in counts.accuracies(confusion).items()}
    assert figures["acc"] == 260 / 273
    assert figures["balanced_acc"] == (260 / 270 + 0 / 3) / 2
    assert repr(figures["acc"]) == repr(float(Fraction(260, 273)))  # the nearest float64


def test_per_class_table_from_a_confusion_matrix() -> None:
    counts = module("models._class_counts")
    # rows: true class; columns: predicted class
    confusion = torch.tensor([[8, 2, 0], [1, 3, 0], [0, 0, 0]])
    table = counts.per_class(confusion, ("cat", "dog", "eel"))
    assert table == {
        "cat": {"precision": 8 / 9, "recall": 8 / 10, "support": 10},
        "dog": {"precision": 3 / 5, "recall": 3 / 4, "support": 4},
        "eel": {"precision": 0.0, "recall": 0.0, "support": 0},  # never seen nor predicted
    }
    actual = [0] * 10 + [1] * 4
    predicted = [0] * 8 + [1] * 2 + [0] + [1] * 3
    preds, target = torch.tensor(predicted), torch.tensor(actual)
    options: dict[str, Any] = {"num_classes": 3, "average": None, "zero_division": 0}
    precision = multiclass_precision(preds, target, **options).tolist()
    recall = multiclass_recall(preds, target, **options).tolist()
    assert [row["precision"] for row in table.values()] == pytest.approx(precision)
    assert [row["recall"] for row in table.values()] == pytest.approx(recall)
    assert [row["support"] for row in table.values()] == torch.bincount(
        target, minlength=3
    ).tolist()


def test_class_counts_metric_sums_batches_like_one_pass() -> None:
    counts = module("models._class_counts")
    metric = counts.ClassCounts(3, "balanced_acc")
    logits = torch.eye(3)[[0, 0, 1, 2, 2, 2]]
    targets = torch.tensor([0, 1, 1, 2, 2, 0])
    metric.update(logits[:4], targets[:4])
    metric.update(logits[4:], targets[4:])
    assert metric.compute().item() == (1 / 2 + 1 / 2 + 2 / 2) / 3
    with pytest.raises(ValueError, match="figure='f1'"):
        counts.ClassCounts(3, "f1")


def test_epoch_stats_reset_starts_a_new_epoch() -> None:
    stats = EpochStats(num_classes=3)
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(5.0), torch.eye(3), torch.tensor([0, 1, 2]))
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(1.0), torch.eye(3)[[1, 1]], torch.tensor([1, 0]))
    figures = stats.compute()
    assert figures["loss"].item() == pytest.approx(1.0)
    assert figures["acc"].item() == 0.5
    assert figures["balanced_acc"].item() == 0.5  # class 1 all right, class 0 all wrong


def test_epoch_sums_round_trip_through_a_checkpoint() -> None:
    stats = EpochStats(num_classes=3)
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(2.0), torch.eye(3)[[0, 1]], torch.tensor([0, 2]))
    resumed = EpochStats(num_classes=3)
    resumed.load_state_dict(stats.state_dict(), torch.device("cpu"))
    for other in (stats, resumed):
        other.update(torch.tensor(1.0), torch.eye(3)[[2]], torch.tensor([2]))
    assert resumed.compute() == stats.compute()
    assert resumed.compute()["loss"].item() == pytest.approx(5 / 3)


def test_a_regressions_epoch_sums_round_trip_through_the_default_state_dict() -> None:
    """Stats' default state is every tensor attribute: a task's own Stats need no code."""
    stats = module("models").Regression().epoch_stats()
    stats.reset(torch.device("cpu"))
    stats.update(torch.tensor(0.5), torch.tensor([[1.0], [2.0]]), torch.tensor([1.5, 2.5]))
    state = stats.state_dict()
    assert set(state) == {"sums"}
    resumed = module("models").Regression().epoch_stats()
    resumed.load_state_dict(state, torch.device("cpu"))
    for other in (stats, resumed):
        other.update(torch.tensor(2.0), torch.tensor([[0.0]]), torch.tensor([3.0]))
    assert resumed.compute() == stats.compute()
    assert resumed.compute()["mae"].item() == pytest.approx((0.5 + 0.5 + 3.0) / 3)
