"""Checkpoints that survive pre-emption: ``last.ckpt`` always holds the newest state."""

from pathlib import Path
from typing import Any

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ..utils.errors import UserError


class PreemptibleCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, with a ``last.ckpt`` that is never behind.

    Lightning (2.6) rewrites ``last.ckpt`` only when it also saves a top-k checkpoint, so
    after epochs where the monitored metric did not improve it lags behind. Here
    ``last.ckpt`` is written after every epoch, at the end of training (e.g. a
    ``max_steps`` stop), every ``last_every_n_steps`` optimizer steps and on SIGTERM, which
    Lightning raises as ``SIGTERMException`` after the current step. ``ckpt_path=last``
    resumes from it exactly.

    Args:
        last_every_n_steps: also write ``last.ckpt`` after every this many optimizer
            steps, so a killed run loses at most that many; 0: only at the points above.
        **kwargs: ``ModelCheckpoint``'s arguments.
    """

    def __init__(self, *, last_every_n_steps: int = 0, **kwargs: Any) -> None:
        if last_every_n_steps < 0:
            raise UserError(
                f"callbacks.model_checkpoint.last_every_n_steps={last_every_n_steps} must "
                "be >= 0 (0 writes last.ckpt only after each epoch)"
            )
        super().__init__(**kwargs)
        self.last_every_n_steps = last_every_n_steps
        self._last_step_written = -1

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, index: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, index)
        every, step = self.last_every_n_steps, trainer.global_step
        if every and step and step % every == 0:
            self._write_last(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self.save_last:
            self._write_last(trainer)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        if self.save_last:
            self._write_last(trainer)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException):
            self._write_last(trainer)

    def _write_last(self, trainer: Trainer) -> None:
        """Write ``last.ckpt`` for the current step, unless this step is already in it."""
        step = trainer.global_step
        if self.dirpath is None or trainer.fast_dev_run or trainer.sanity_checking:
            return
        # Several batches end on one step under gradient accumulation; Lightning's own save
        # of last.ckpt (after a new top-k checkpoint) records its step in _last_global_step_saved.
        written_by_lightning = self._last_global_step_saved == step and bool(self.last_model_path)
        if step == self._last_step_written or written_by_lightning:
            return
        trainer.save_checkpoint(self.last_path)
        self._last_step_written = step

    @property
    def last_path(self) -> Path:
        return Path(str(self.dirpath)) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}"
