"""A checkpoint that describes itself: what rebuilds its data module and its model.

Written into every training checkpoint by :class:`DescribeCheckpoint`; read back by
:mod:`.restore`, so eval, export and predict need nothing but the checkpoint.
"""

from typing import Any

import torch
from lightning import Callback, LightningDataModule, LightningModule, Trainer

from platekit._registry import active
from platekit.checkpoints._run_record import PRECISION, RECORD_KEY
from platekit.config._nodes import to_plain
from platekit.config._threads import CHECKPOINT_KEY as THREADS_KEY
from platekit.data._adapters import data_card
from platekit.data._info import DataInfo

DATA_KEY = "data"
MODEL_KEY = "model"


class DescribeCheckpoint(Callback):
    """Add the data card and the model's class to every checkpoint the trainer writes."""

    def __init__(self, info: DataInfo, run_settings: dict[str, Any] | None = None) -> None:
        self.info = info
        self.run_settings = run_settings  # run_record.record() of the run's config

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        datamodule = trainer.datamodule  # type: ignore[attr-defined]  # set outside Trainer
        checkpoint[DATA_KEY] = data_card(datamodule, self.info)
        # The registry's name for the class: it survives a move within its package.
        checkpoint[MODEL_KEY] = {"_target_": active().key(type(pl_module))}
        checkpoint[THREADS_KEY] = torch.get_num_threads()  # a resume with auto takes it
        if self.run_settings is not None:  # what a resume continues with
            checkpoint[RECORD_KEY] = {**self.run_settings, PRECISION: str(trainer.precision)}
        plain_hyperparameters(checkpoint)


def plain_hyperparameters(checkpoint: dict[str, Any]) -> None:
    """Lightning stores the model's and the data module's ``hparams`` (and callbacks'
    states) as they are: make every OmegaConf container in them a plain one, whatever saved
    it (a plain LightningDataModule given ``features=[a,b]`` by Hydra too), so
    ``weights_only`` loads."""
    for owner in (LightningModule, LightningDataModule):
        key = owner.CHECKPOINT_HYPER_PARAMS_KEY
        if key in checkpoint:
            checkpoint[key] = to_plain(dict(checkpoint[key]))
        # Lightning records an OmegaConf hparams container's class: a pickled global.
        checkpoint.pop(owner.CHECKPOINT_HYPER_PARAMS_TYPE, None)
    if "callbacks" in checkpoint:  # callbacks' states: a callback may keep its settings
        checkpoint["callbacks"] = to_plain(dict(checkpoint["callbacks"]))
