"""Per-epoch values of the logged metrics and the learning rate, kept in memory.

The end-of-run summary and the plots read them, whatever metric logger is configured.
The history is saved in checkpoints, so a resumed run still has the epochs closed before
the checkpoint was written (the epoch a checkpoint ends is closed only after the save).
"""

from typing import Any

from lightning import Callback, LightningModule, Trainer

STAGES = ("train/", "val/")


class MetricHistory(Callback):
    """One row per finished epoch: ``{"epoch": 0, "lr": 0.003, "train/loss": ..., ...}``.

    An epoch's row is written when the next epoch starts or training ends, because
    ``LightningModule.on_train_epoch_end`` logs after callbacks' hooks of the same name.
    Values are read once per epoch, never per step.
    """

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []
        self._open: dict[str, float] | None = None  # the epoch in progress
        self._validated = False

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._close(trainer)
        self._open = {"epoch": trainer.current_epoch, "lr": learning_rate(trainer)}
        self._validated = False

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated = True

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._close(trainer)

    def _close(self, trainer: Trainer) -> None:
        if self._open is None:
            return
        row = dict(self._open)
        for name, value in trainer.callback_metrics.items():
            # val/* from an earlier epoch is stale when validation skipped this one.
            if name.startswith("train/") or (name.startswith("val/") and self._validated):
                row[name] = float(value)
        self.epochs.append(row)
        self._open = None

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": [dict(row) for row in self.epochs]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.epochs = [dict(row) for row in state_dict.get("epochs", [])]


def learning_rate(trainer: Trainer) -> float:
    """The first optimizer's learning rate now (its first parameter group)."""
    if not trainer.optimizers:
        return float("nan")
    return float(trainer.optimizers[0].param_groups[0]["lr"])
