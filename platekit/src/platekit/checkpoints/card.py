"""A checkpoint that describes itself: what rebuilds its data module and its model.

Written into every training checkpoint by :class:`DescribeCheckpoint`; read back by
:mod:`.restore`, so eval, export and predict need nothing but the checkpoint.
"""

from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer

from ..data.adapters import data_card
from ..data.info import DataInfo
from ..runtime.threads import CHECKPOINT_KEY as THREADS_KEY
from .registry import active

DATA_KEY = "data"
MODEL_KEY = "model"


class DescribeCheckpoint(Callback):
    """Add the data card and the model's class to every checkpoint the trainer writes."""

    def __init__(self, info: DataInfo) -> None:
        self.info = info

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        datamodule = trainer.datamodule  # type: ignore[attr-defined]  # set outside Trainer
        checkpoint[DATA_KEY] = data_card(datamodule, self.info)
        # The registry's name for the class: it survives a move within its package.
        checkpoint[MODEL_KEY] = {"_target_": active().key(type(pl_module))}
        checkpoint[THREADS_KEY] = torch.get_num_threads()  # a resume with auto takes it
