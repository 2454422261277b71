"""The LightningModule: loss, accuracy, optimizer and schedule around any net.

Its hyperparameters are plain dicts (each with a ``_target_``), so a checkpoint loads
with ``torch.load(weights_only=True)`` and can rebuild its own model without the config.
"""

import functools
from typing import Any

from hydra.utils import instantiate
from lightning import LightningModule
from torch import Tensor, nn
from torch.nn.utils import get_total_norm
from torch.optim import Optimizer
from torchmetrics.classification import MulticlassAccuracy

from ..runtime.config import to_plain
from .epoch_stats import EpochStats

Batch = tuple[Tensor, Tensor]


class Classifier(LightningModule):
    """Cross-entropy classification, with macro accuracy per epoch.

    Training loss and accuracy are summed on the device and logged once per epoch
    (:class:`EpochStats`); validation and test use torchmetrics.

    Args:
        net: config of the network, e.g. ``{"_target_": "...SmallCNN", "num_outputs": 10}``.
        optimizer: config of a ``torch.optim`` optimizer, built over the net's parameters.
        scheduler: config of an epoch-wise LR scheduler, or ``None`` for a constant LR.
        num_classes: number of classes, for the accuracy metrics; the model builder sets it
            from the data (``models/build.py``).
        compile: run the net through ``torch.compile``. The net itself stays the
            registered module, so checkpoints hold its plain parameter names (no
            ``_orig_mod.``) and load into an uncompiled model. Not saved as a
            hyperparameter: it is how this run executes, not what the model is.
    """

    def __init__(
        self,
        net: dict[str, Any],
        optimizer: dict[str, Any],
        scheduler: dict[str, Any] | None = None,
        num_classes: int = 2,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(
            {
                "net": to_plain(net),
                "optimizer": to_plain(optimizer),
                "scheduler": to_plain(scheduler),
                "num_classes": num_classes,
            }
        )
        self.net: nn.Module = instantiate(self.hparams.net)
        if compile:
            self.net.compile()  # compiles the module's call in place; state_dict keys unchanged
        self.loss = nn.CrossEntropyLoss()
        self.train_stats = EpochStats(num_classes)
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)

    def on_train_epoch_start(self) -> None:
        self.train_stats.reset(self.device)

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        inputs, targets = batch
        logits = self.net(inputs)
        loss = self.loss(logits, targets)
        # Accumulated on the device and logged once per epoch: a per-step `self.log` or
        # torchmetrics update costs 0.1-0.5 ms, several percent of a small model's step.
        self.train_stats.update(loss, logits, targets)
        return loss

    def on_before_optimizer_step(self, optimizer: Optimizer) -> None:
        # Gradients are unscaled (16-mixed) and not yet clipped: this is the norm that
        # trainer.gradient_clip_val is compared with. Under DDP they are already averaged.
        # Only on the steps Lightning writes logs (when the step about to finish is a
        # multiple of log_every_n_steps), and straight to the loggers: a `self.log` call
        # costs 0.25-0.5 ms, which every logged step would pay.
        every = self.trainer.log_every_n_steps
        if not every or (self.global_step + 1) % every:
            return
        grads = [p.grad for p in self.net.parameters() if p.grad is not None]
        if not grads:
            return
        metrics = {"train/grad_norm": float(get_total_norm(grads)), "epoch": self.current_epoch}
        for logger in self.loggers:  # each writes on rank 0 only
            logger.log_metrics(metrics, step=self.global_step)  # the step Lightning would log

    def on_train_epoch_end(self) -> None:
        sum_over_ranks = functools.partial(self.trainer.strategy.reduce, reduce_op="sum")
        loss, accuracy = self.train_stats.compute(sum_over_ranks)
        self.log("train/loss", loss)
        self.log("train/acc", accuracy)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "val", self.val_acc)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "test", self.test_acc)

    def _evaluate(self, batch: Batch, stage: str, accuracy: MulticlassAccuracy) -> None:
        inputs, targets = batch
        logits = self.net(inputs)
        accuracy.update(logits, targets)
        # sync_dist: under DDP the loss is averaged over every rank's shard (accuracy syncs itself).
        loss = self.loss(logits, targets)
        self.log(f"{stage}/loss", loss, batch_size=len(targets), sync_dist=True)
        self.log(f"{stage}/acc", accuracy, batch_size=len(targets))

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = instantiate(self.hparams.optimizer, _partial_=True)(self.parameter_groups())
        if not self.hparams.scheduler:
            return {"optimizer": optimizer}
        scheduler = instantiate(self.hparams.scheduler, _partial_=True)(optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"},
        }

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Weight decay on weight matrices and kernels only, not on biases or norm scales."""
        decay = [p for p in self.net.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in self.net.parameters() if p.requires_grad and p.ndim < 2]
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
