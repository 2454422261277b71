"""Checkpoints that survive pre-emption: ``last.ckpt`` is also written on SIGTERM."""

from pathlib import Path

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException


class PreemptibleCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, plus a ``last.ckpt`` when the job receives SIGTERM.

    Lightning turns SIGTERM into a ``SIGTERMException`` after the current training step;
    the checkpoint saved here resumes exactly with ``ckpt_path=last``.
    """

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException) and self.dirpath is not None:
            trainer.save_checkpoint(self.last_path)

    @property
    def last_path(self) -> Path:
        return Path(str(self.dirpath)) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}"
