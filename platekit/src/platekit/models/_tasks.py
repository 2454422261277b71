"""What the model learns: a task names its loss, its metrics and the metric to monitor.

This is the one place a metric name is spelled. Checkpoint selection, early stopping, the
progress line, plots, the run summary, ``metrics.json`` and sweeps read them from the task
the model owns (``model.task``). Metrics are logged as ``<stage>/<name>``: ``train/loss``,
``val/acc``, ``test/rmse``. A task's ``monitor`` setting picks the metric that selects the
best checkpoint and stops early (its default is the task's ``monitored``).

Add a metric: one :class:`Metric` in the task's ``metrics``, its torchmetrics object in
``eval_metrics`` and its training-epoch value in the task's epoch statistics.
Add a task: a subclass of :class:`Task`, and its ``target_kind`` in ``TASKS``.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional
from torchmetrics import MeanAbsoluteError, MeanSquaredError, R2Score
from torchmetrics import Metric as TorchMetric

from platekit._errors import UserError
from platekit._registry import NamedTask
from platekit.models._class_counts import ACC, BALANCED_ACC, ClassCounts
from platekit.models._epoch_stats import EpochStats

TRAIN, VAL, TEST = "train", "val", "test"
STAGES = (TRAIN, VAL, TEST)
LOSS = "loss"
GRAD_NORM = f"{TRAIN}/grad_norm"  # logged every log_every_n_steps steps, not per epoch
MODES = ("max", "min")

Reduce = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Metric:
    """One figure the task reports each epoch, e.g. ``Metric("acc", "accuracy", "max")``.

    Args:
        name: logged as ``train/<name>``, ``val/<name>`` and ``test/<name>``.
        label: what it is, in words (plot axis, progress line).
        mode: ``max`` if larger is better, ``min`` if smaller is.
        plot: the plot file (without ``.png``) that draws it; metrics sharing one are
            drawn together.
    """

    name: str
    label: str
    mode: str
    plot: str

    def at(self, stage: str) -> str:
        return f"{stage}/{self.name}"


class Task(NamedTask, ABC):
    """A learning task: loss, metrics, the monitored metric and how outputs become predictions.

    A subclass sets ``target_kind`` (the :class:`~..data.info.DataInfo` kind it trains on),
    ``metrics`` (the loss first) and ``monitored`` (the name of one of them, the default);
    the monitored metric is read on the validation split. A task given a ``monitor``
    setting watches that metric instead (:meth:`choose_monitor`).
    """

    target_kind: str
    metrics: tuple[Metric, ...]
    monitored: str

    @abstractmethod
    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """The training loss of a batch: ``outputs`` (B, num_outputs), ``targets`` (B,)."""

    @abstractmethod
    def eval_metrics(self) -> dict[str, TorchMetric]:
        """Fresh torchmetrics for validation or test, by metric name (the loss excluded)."""

    @abstractmethod
    def epoch_stats(self) -> "Stats":
        """An accumulator of the training epoch's metrics, on the device."""

    def predictions(self, outputs: Tensor) -> Tensor:
        """What ``eval_metrics`` are updated with: the outputs by default."""
        return outputs

    @property
    def monitor(self) -> str:
        """The metric that picks the best checkpoint and stops early, e.g. ``val/acc``."""
        return self.metric(self.monitored).at(VAL)

    @property
    def mode(self) -> str:
        return self.metric(self.monitored).mode

    def metric(self, name: str) -> Metric:
        return next(metric for metric in self.metrics if metric.name == name)

    def choose_monitor(self, monitor: str | None) -> None:
        """Watch ``monitor`` (a metric's name, e.g. ``balanced_acc``); ``None``: the default."""
        if monitor is None:
            return
        names = [metric.name for metric in self.metrics]
        name = monitor.removeprefix(f"{VAL}/")
        if name not in names:
            raise UserError(
                f"model.task.monitor={monitor} is not a metric of {type(self).__name__}; "
                f"use one of {names}"
            )
        self.monitored = name

    def names(self, stage: str) -> list[str]:
        """Every metric logged in ``stage``, e.g. ``["val/loss", "val/acc"]``."""
        return [metric.at(stage) for metric in self.metrics]

    def plots(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Plot file stem -> (y label, the train and val metrics it draws)."""
        plots: dict[str, tuple[str, tuple[str, ...]]] = {}
        for metric in self.metrics:
            label, drawn = plots.get(metric.plot, (metric.label, ()))
            plots[metric.plot] = (label, (*drawn, metric.at(TRAIN), metric.at(VAL)))
        return plots


class Stats(ABC):
    """Sums over a training epoch, added to on every step without a host sync."""

    @abstractmethod
    def reset(self, device: torch.device) -> None: ...

    @abstractmethod
    def update(self, loss: Tensor, outputs: Tensor, targets: Tensor) -> None: ...

    @abstractmethod
    def compute(self, sum_over_ranks: Reduce | None = None) -> dict[str, Tensor]:
        """Metric name -> value of what was added since the last reset."""

    def state_dict(self) -> dict[str, Tensor]:
        """The running sums, for a checkpoint: by default every tensor attribute, on the CPU.

        A resumed run continues its interrupted epoch from them, so that epoch's figures
        cover all its steps. Override both methods if the sums live elsewhere.
        """
        return {
            name: value.cpu() for name, value in vars(self).items() if isinstance(value, Tensor)
        }

    def load_state_dict(self, state: dict[str, Tensor], device: torch.device) -> None:
        """Continue from sums :meth:`state_dict` returned, on ``device``."""
        for name, value in state.items():
            setattr(self, name, value.to(device).clone())


class Classification(Task):
    """Cross-entropy over ``num_classes`` logits; plain and balanced accuracy.

    ``acc`` is the share of samples predicted right; ``balanced_acc`` the mean over classes
    of each class's recall (the two differ when classes are imbalanced). Both are exact
    ratios of counts (``class_counts.py``).

    Args:
        num_classes: the number of classes (the data's).
        monitor: the metric that picks the best checkpoint and stops early: ``acc``
            (default), ``balanced_acc`` or ``loss``.
        class_weights: a weight per class for the loss (validation's too), e.g. to count
            a rare class more. ``None``: all 1. The model builder turns ``balanced`` into
            ``n_samples / (num_classes * n_samples_of_class)`` of the train split.
    """

    target_kind = "class"
    metrics = (
        Metric(LOSS, "cross-entropy", "min", "loss"),
        Metric(ACC, "accuracy", "max", "accuracy"),
        Metric(BALANCED_ACC, "balanced accuracy (mean recall)", "max", "accuracy"),
    )
    monitored = ACC

    def __init__(
        self,
        num_classes: int,
        monitor: str | None = None,
        class_weights: list[float] | None = None,
    ) -> None:
        self.num_classes = num_classes
        self.choose_monitor(monitor)
        self.class_weights = checked_class_weights(class_weights, num_classes)
        self._weight = None if self.class_weights is None else torch.tensor(self.class_weights)

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        weight = self._weight
        if weight is not None and weight.device != outputs.device:
            weight = self._weight = weight.to(outputs.device)
        # weighted: sum(w[y] * -log p[y]) / sum(w[y]) over the batch
        return functional.cross_entropy(outputs, targets, weight=weight)

    def eval_metrics(self) -> dict[str, TorchMetric]:
        return {name: ClassCounts(self.num_classes, name) for name in (ACC, BALANCED_ACC)}

    def epoch_stats(self) -> Stats:
        return ClassStats(self.num_classes)


class ClassStats(Stats):
    """Training loss, ``acc`` and ``balanced_acc`` (:class:`EpochStats`), by the task's names."""

    def __init__(self, num_classes: int) -> None:
        self.stats = EpochStats(num_classes)

    def reset(self, device: torch.device) -> None:
        self.stats.reset(device)

    def update(self, loss: Tensor, outputs: Tensor, targets: Tensor) -> None:
        self.stats.update(loss, outputs, targets)

    def compute(self, sum_over_ranks: Reduce | None = None) -> dict[str, Tensor]:
        return self.stats.compute(sum_over_ranks)

    def state_dict(self) -> dict[str, Tensor]:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict[str, Tensor], device: torch.device) -> None:
        self.stats.load_state_dict(state, device)


BALANCED = "balanced"


def checked_class_weights(weights: Any, num_classes: int) -> list[float] | None:
    """``weights`` as one finite float >= 0 per class; one line naming the problem otherwise."""
    if weights is None:
        return None
    if weights == BALANCED:
        raise UserError(
            "model.task.class_weights=balanced needs the train split's class counts, which "
            "a BaseDataModule gives (data/_base.py); give one weight per class instead, "
            "e.g. model.task.class_weights=[1,5]"
        )
    if isinstance(weights, str | bytes) or not hasattr(weights, "__len__"):
        raise UserError(
            f"model.task.class_weights={weights!r}: give `balanced` or one weight per class "
            f"({num_classes} numbers), e.g. [1,5]"
        )
    values = list(weights)
    if len(values) != num_classes:
        raise UserError(
            f"model.task.class_weights has {len(values)} weights but the data has "
            f"{num_classes} classes; give one per class, or `balanced`"
        )
    try:
        floats = [float(value) for value in values]
    except (TypeError, ValueError):
        floats = []
    if not floats or not all(0 <= value < float("inf") for value in floats) or not any(floats):
        raise UserError(
            f"model.task.class_weights={values}: each weight must be a finite number >= 0, "
            "and one at least > 0"
        )
    return floats


def balanced_class_weights(targets: Tensor, num_classes: int) -> list[float]:
    """``n / (num_classes * n_c)`` per class ``c`` of the train split's ``targets``.

    A class with no train samples gets weight 1 (it adds nothing to the training loss).
    """
    counts = torch.bincount(targets.long().flatten(), minlength=num_classes).tolist()
    total = sum(counts)
    return [total / (num_classes * count) if count else 1.0 for count in counts]


class Regression(Task):
    """Mean squared error on one real value; MAE, RMSE and R2, with RMSE monitored.

    The net learns standardised targets ``(y - target_mean) / target_std`` (the train
    split's): its output is mapped back to the target's units inside the model
    (:meth:`output_head`), so predictions, export and metrics are in real units while the
    loss, ``train/loss``, is the MSE of standardised targets (about 1 for a constant guess).
    """

    target_kind = "value"
    metrics = (
        Metric(LOSS, "MSE of standardised targets", "min", "loss"),
        Metric("mae", "mean absolute error", "min", "error"),
        Metric("rmse", "root mean squared error", "min", "error"),
        Metric("r2", "R2 (coefficient of determination)", "max", "r2"),
    )
    monitored = "rmse"

    def __init__(
        self, target_mean: float = 0.0, target_std: float = 1.0, monitor: str | None = None
    ) -> None:
        self.target_mean = float(target_mean)
        self.target_std = float(target_std)
        self.choose_monitor(monitor)

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        # outputs (B, 1) in target units; the loss is taken on the standardised scale
        error = (outputs.squeeze(-1) - targets) / self.target_std
        return error.square().mean()

    def predictions(self, outputs: Tensor) -> Tensor:
        return outputs.squeeze(-1)

    def eval_metrics(self) -> dict[str, TorchMetric]:
        return {
            "mae": MeanAbsoluteError(),
            "rmse": MeanSquaredError(squared=False),
            "r2": R2Score(),
        }

    def epoch_stats(self) -> Stats:
        return ValueStats()

    def output_head(self) -> nn.Module:
        return Unstandardise(self.target_mean, self.target_std)


class ValueStats(Stats):
    """Sums of the loss, absolute and squared errors and the targets over an epoch."""

    def __init__(self) -> None:
        self.sums = torch.zeros(6)  # loss*n, n, |e|, e^2, y, y^2

    def reset(self, device: torch.device) -> None:
        self.sums = torch.zeros(6, device=device)

    def update(self, loss: Tensor, outputs: Tensor, targets: Tensor) -> None:
        error = outputs.detach().squeeze(-1).float() - targets
        y = targets.float()
        n = torch.full((), len(targets), dtype=torch.float32, device=y.device)
        batch = torch.stack(
            [loss.detach().float() * n, n, error.abs().sum(), error.square().sum(), y.sum(),
             y.square().sum()]
        )  # fmt: skip
        self.sums.add_(batch)

    def compute(self, sum_over_ranks: Reduce | None = None) -> dict[str, Tensor]:
        sums = (sum_over_ranks or (lambda tensor: tensor))(self.sums)
        loss, n, abs_error, sq_error, y, y_sq = sums.unbind()
        n = n.clamp(min=1)
        spread = (y_sq - y.square() / n).clamp(min=1e-12)  # n x variance of the targets
        return {
            LOSS: loss / n,
            "mae": abs_error / n,
            "rmse": (sq_error / n).sqrt(),
            "r2": 1 - sq_error / spread,
        }


class Unstandardise(nn.Module):
    """``z * std + mean``: the net's standardised output in the target's units."""

    mean: Tensor  # buffers, registered in __init__
    std: Tensor

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean))
        self.register_buffer("std", torch.tensor(std))

    def forward(self, outputs: Tensor) -> Tensor:
        return outputs * self.std + self.mean


TASKS: dict[str, type[Task]] = {"class": Classification, "value": Regression}


def task_of(model: nn.Module) -> Task:
    """The task ``model`` learns: its ``task`` attribute, as a ``TaskModule`` holds it."""
    task = getattr(model, "task", None)
    if not isinstance(task, Task):
        raise UserError(
            f"model {type(model).__name__} has no task (a models/_tasks.py Task as its "
            "`.task`); use TaskModule or give the model a `task` attribute"
        )
    return task


def target_statistics(targets: Tensor) -> dict[str, float]:
    """The train split's target mean and std, for :class:`Regression` (std 1 if constant)."""
    values = targets.double()
    std = float(values.std()) if len(values) > 1 else 1.0
    return {"target_mean": float(values.mean()), "target_std": std if std > 0 else 1.0}


def task_config(module: str, kind: str, **args: Any) -> dict[str, Any]:
    """The config of the task for ``kind`` targets, e.g. ``{"_target_": ...Classification}``."""
    cls = TASKS[kind]
    return {"_target_": f"{module}.{cls.__qualname__}", **args}
