"""Per-epoch values of the logged metrics and the learning rate, kept in memory.

The end-of-run summary and the plots read them, whatever metric logger is configured.
The history is saved in checkpoints, so a resumed run plots and summarises all its epochs.
"""

from typing import Any

from lightning import Callback, LightningModule, Trainer

from platekit.models._tasks import TRAIN, VAL

Row = dict[str, float]


class MetricHistory(Callback):
    """One row per epoch: ``{"epoch": 0, "lr": 0.003, <every train/ and val/ metric>}``.

    ``lr`` is the learning rate the epoch trained with. The metrics are read when the
    epoch is over: when the next one starts, training ends, or a checkpoint is saved at
    the epoch's end (``LightningModule.on_train_epoch_end`` logs after callbacks' hooks
    of that name, so they are complete only then). Values are read once per epoch.
    """

    def __init__(self) -> None:
        self.epochs: list[Row] = []
        self._trainer: Trainer | None = None
        self._open: Row | None = None  # the epoch in progress
        self._validated = False  # whether validation ran in the open epoch
        self._epoch_done = False  # whether the open epoch's batches are all done

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # A run resumed mid-epoch gets no on_train_epoch_start for that epoch; its row was
        # opened before the interruption (with the lr the epoch started with) and is kept.
        self._trainer = trainer
        if self._open is None or self._open["epoch"] != trainer.current_epoch:
            self._start(trainer)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._open is not None and self._open["epoch"] != trainer.current_epoch:
            self.epochs.append(self._closed(trainer))
            self._open = None
        if self._open is None:
            self._start(trainer)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated = True

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch_done = True

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._open is not None:
            self.epochs.append(self._closed(trainer))
            self._open = None

    def _start(self, trainer: Trainer) -> None:
        self._open = {"epoch": trainer.current_epoch, "lr": learning_rate(trainer)}
        self._validated = self._epoch_done = False

    def _closed(self, trainer: Trainer) -> Row:
        row = dict(self._open or {})
        for name, value in trainer.callback_metrics.items():
            # val/* from an earlier epoch is stale when validation skipped this one.
            stage = name.split("/", 1)[0]
            if stage == TRAIN or (stage == VAL and self._validated):
                row[name] = float(value)
        return row

    def state_dict(self) -> dict[str, Any]:
        rows = [dict(row) for row in self.epochs]
        if self._open is not None and self._epoch_done and self._trainer is not None:
            rows.append(self._closed(self._trainer))  # saved at the end of this epoch
            return {"epochs": rows}
        # Saved mid-epoch: the open row keeps the lr the epoch started with for a resume.
        return {"epochs": rows, "open": dict(self._open) if self._open is not None else None}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.epochs = [dict(row) for row in state_dict.get("epochs", [])]
        opened = state_dict.get("open")
        self._open = dict(opened) if opened is not None else None


def learning_rate(trainer: Trainer) -> float:
    """The first optimizer's learning rate now (its first parameter group)."""
    if not trainer.optimizers:
        return float("nan")
    return float(trainer.optimizers[0].param_groups[0]["lr"])
