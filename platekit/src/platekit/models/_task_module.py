"""The LightningModule: a net, the task it learns, its optimizer and lr schedule.

Its hyperparameters are plain dicts (each with a ``_target_``), so a checkpoint loads
with ``torch.load(weights_only=True)`` and can rebuild its own model without the config.
What is learned (loss, metrics, the monitored metric) is the task's (``tasks.py``).
"""

import functools
import logging
import math
from typing import Any

from lightning import LightningModule
from lightning.fabric.utilities.data import AttributeDict
from lightning.pytorch.utilities.types import OptimizerConfig, OptimizerLRSchedulerConfig
from torch import Tensor, nn
from torch.nn.utils import get_total_norm
from torch.optim import Optimizer
from torchmetrics import Metric as TorchMetric

from platekit._errors import UserError
from platekit._registry import active
from platekit.checkpoints._upgrade import EPOCH_SUMS_KEY  # the training epoch's running sums
from platekit.config._nodes import to_plain
from platekit.config._schema import supply
from platekit.models._class_counts import ClassCounts
from platekit.models._tasks import GRAD_NORM, LOSS, TEST, TRAIN, VAL, Regression, Task

Batch = tuple[Tensor, Tensor]


log = logging.getLogger(__name__)

# configure_optimizers passes these itself: a config setting them would clash.
supply("optimizer", {"params"}, "the model, its parameter groups")
supply(
    "scheduler",
    {"optimizer", "total_steps", "steps_per_epoch"},
    "the model, from trainer.max_epochs or max_steps and the data",
)


class TaskModule(LightningModule):
    """Trains ``net`` on ``task``; logs the task's metrics once per epoch per stage.

    Training metrics are summed on the device and logged once per epoch (the task's
    ``epoch_stats``); validation and test use the task's torchmetrics. The sums are saved
    in every checkpoint (added up over ranks), so a run resumed mid-epoch reports that
    epoch's figures over all its steps, as an uninterrupted run does.

    Args:
        net: config of the network, e.g. ``{"_target_": "...SmallCNN", "num_outputs": 10}``.
        task: config of the task, e.g. ``{"_target_": "...Classification", "num_classes": 10}``;
            the model builder picks it from the data (``models/_build.py``).
        optimizer: config of a ``torch.optim`` optimizer (``configs/optimizer/``), built over
            the net's parameters, without weight decay on biases and norm scales.
        scheduler: config of a per-step schedule (``configs/scheduler/``, ``schedules.py``),
            given the run's optimizer steps; ``None``: the optimizer's lr throughout.
        compile: run the net through ``torch.compile``. The net itself stays the
            registered module, so checkpoints hold its plain parameter names (no
            ``_orig_mod.``) and load into an uncompiled model. Not saved as a
            hyperparameter: it is how this run executes, not what the model is.
    """

    hparams: AttributeDict  # what save_hyperparameters() stores (Lightning types it loosely)

    def __init__(
        self,
        net: dict[str, Any],
        task: dict[str, Any],
        optimizer: dict[str, Any],
        scheduler: dict[str, Any] | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(
            {
                "net": to_plain(net),
                "task": to_plain(task),
                "optimizer": to_plain(optimizer),
                "scheduler": to_plain(scheduler),
            }
        )
        # Built through the registry: a checkpoint's hyperparameters name only its classes.
        self.task: Task = active().build(self.hparams.task, "task")
        net_module: nn.Module = active().build(self.hparams.net, "net")
        if isinstance(self.task, Regression):  # outputs in the target's units
            net_module = nn.Sequential(net_module, self.task.output_head())
        self.net = net_module
        if compile:
            self.net.compile()  # compiles the module's call in place; state_dict keys unchanged
        self.train_stats = self.task.epoch_stats()
        self._sums_to_restore: dict[str, Tensor] | None = None
        self._resumed = False
        self.val_metrics = nn.ModuleDict(self.task.eval_metrics())
        self.test_metrics = nn.ModuleDict(self.task.eval_metrics())
        # The last test pass's (true, predicted) counts, summed over ranks: the counts the
        # test accuracies were computed from, so the per-class table and plots agree with them.
        self.test_confusion: Tensor | None = None
        self.loaded_epoch: int | None = None  # the epoch of the checkpoint last loaded

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)

    def on_train_start(self) -> None:
        # A run resumed mid-epoch gets no on_train_epoch_start for that epoch: it continues
        # the checkpoint's sums (rank 0 holds the total, the other ranks start from zero).
        self.train_stats.reset(self.device)
        sums, self._sums_to_restore = self._sums_to_restore, None
        if sums is not None and self.global_rank == 0:
            self.train_stats.load_state_dict(sums, self.device)
        loop = self.trainer.fit_loop
        if (
            sums is None
            and self._resumed
            and (loop.restarted_mid_epoch or loop.restarted_on_epoch_end)
        ):
            log.warning(
                "the checkpoint holds no running sums of its unfinished epoch %d (written "
                "by platekit 0.1): that epoch's train/ figures average only the steps after "
                "the resume",
                self.current_epoch,
            )

    def on_train_epoch_start(self) -> None:
        self.train_stats.reset(self.device)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Every rank saves (Trainer.save_checkpoint runs on all), so the sum is collective.
        reduce = functools.partial(self.trainer.strategy.reduce, reduce_op="sum")
        sums = self.train_stats.state_dict()
        checkpoint[EPOCH_SUMS_KEY] = {
            name: reduce(value.to(self.device)).cpu() for name, value in sums.items()
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        sums = checkpoint.get(EPOCH_SUMS_KEY)
        self._sums_to_restore = sums if isinstance(sums, dict) else None
        self._resumed = True
        epoch = checkpoint.get("epoch")
        self.loaded_epoch = (
            epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
        )

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        inputs, targets = batch
        outputs = self.net(inputs)
        loss = self.task.loss(outputs, targets)
        # Accumulated on the device and logged once per epoch: a per-step `self.log` or
        # torchmetrics update costs 0.1-0.5 ms, several percent of a small model's step.
        self.train_stats.update(loss, outputs, targets)
        return loss

    def on_before_optimizer_step(self, optimizer: Optimizer) -> None:
        # Gradients are unscaled (16-mixed) and not yet clipped: this is the norm that
        # trainer.gradient_clip_val is compared with. Under DDP they are already averaged.
        # Only on the steps Lightning writes logs (when the step about to finish is a
        # multiple of log_every_n_steps), and straight to the loggers: a `self.log` call
        # costs 0.25-0.5 ms, which every logged step would pay.
        every = self.trainer.log_every_n_steps  # type: ignore[attr-defined]  # set outside Trainer
        if not every or (self.global_step + 1) % every:
            return
        grads = [p.grad for p in self.net.parameters() if p.grad is not None]
        if not grads:
            return
        metrics = {GRAD_NORM: float(get_total_norm(grads)), "epoch": self.current_epoch}
        for logger in self.loggers:  # each writes on rank 0 only
            logger.log_metrics(metrics, step=self.global_step)  # the step Lightning would log

    def on_train_epoch_end(self) -> None:
        sum_over_ranks = functools.partial(self.trainer.strategy.reduce, reduce_op="sum")
        # Already totals over every rank, equal on each: sync_dist's mean leaves them as
        # they are (and tells Lightning they are global figures, not one rank's).
        for name, value in self.train_stats.compute(sum_over_ranks).items():
            self.log(f"{TRAIN}/{name}", value, sync_dist=True)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, VAL, self.val_metrics)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, TEST, self.test_metrics)

    def on_test_epoch_start(self) -> None:
        self.test_confusion = None

    def on_test_epoch_end(self) -> None:
        counts = [
            metric for metric in self.test_metrics.values() if isinstance(metric, ClassCounts)
        ]
        if counts:  # before Lightning resets the logged metrics
            self.test_confusion = counts[0].summed().reshape(counts[0].shape)

    def _evaluate(self, batch: Batch, stage: str, metrics: nn.ModuleDict) -> None:
        inputs, targets = batch
        outputs = self.net(inputs)
        # sync_dist: under DDP the loss is averaged over every rank's shard (metrics sync
        # themselves).
        loss = self.task.loss(outputs, targets)
        self.log(f"{stage}/{LOSS}", loss, batch_size=len(targets), sync_dist=True)
        predictions = self.task.predictions(outputs)
        for name, metric in metrics.items():
            assert isinstance(metric, TorchMetric)  # eval_metrics() holds torchmetrics only
            metric.update(predictions, targets)
            self.log(f"{stage}/{name}", metric, batch_size=len(targets))

    def configure_optimizers(self) -> OptimizerConfig | OptimizerLRSchedulerConfig:
        optimizer = self.build_optimizer()
        if not self.hparams.scheduler:
            return {"optimizer": optimizer}
        total, per_epoch = self.planned_steps()
        scheduler = active().build(
            self.hparams.scheduler,
            "scheduler",
            optimizer=optimizer,
            total_steps=total,
            steps_per_epoch=per_epoch,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def build_optimizer(self) -> Optimizer:
        """The configured optimizer over the net's parameter groups."""
        return active().build(self.hparams.optimizer, "optimizer", params=self.parameter_groups())

    def planned_steps(self) -> tuple[int, int | None]:
        """Optimizer steps of the whole run and of one epoch, gradient accumulation included."""
        total = self.trainer.estimated_stepping_batches  # sets the training loader up
        if not math.isfinite(total):
            raise UserError(
                "the lr schedule needs the run's length, but trainer.max_epochs=-1 and "
                "trainer.max_steps=-1; set either, or scheduler=none"
            )
        batches = self.trainer.num_training_batches
        accumulate = self.trainer.accumulate_grad_batches
        per_epoch = math.ceil(batches / accumulate) if math.isfinite(batches) else None
        return int(total), per_epoch

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Weight decay on weight matrices and kernels only, not on biases or norm scales."""
        decay = [p for p in self.net.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in self.net.parameters() if p.requires_grad and p.ndim < 2]
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
