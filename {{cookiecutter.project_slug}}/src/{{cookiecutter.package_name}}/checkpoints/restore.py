"""Open a training checkpoint and rebuild what it describes: its model and its data.

The one way eval, export and predict open a checkpoint::

    checkpoint = Checkpoint.open(path, allowed=cfg.checkpoint_targets)
    model = checkpoint.model()                       # weights loaded, eval mode
    datamodule = checkpoint.datamodule(overrides)    # the run's own data and split

Everything built from the file is checked against the allowlist first (``targets.py``).
"""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from lightning import LightningDataModule, LightningModule

from ..cli.errors import UserError, first_line
from ..data.info import DataInfo
from .card import DATA_KEY, MODEL_KEY
from .io import load_checkpoint, load_weights
from .targets import check_targets

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    """A verified checkpoint and what it says about itself."""

    path: Path
    content: dict[str, Any]
    allowed: tuple[str, ...] = ()

    @classmethod
    def open(cls, path: str | Path, allowed: Iterable[str] = ()) -> "Checkpoint":
        """Load (weights only, verified) and check it describes its data and model."""
        content = load_checkpoint(path)
        checkpoint = cls(Path(path), content, tuple(allowed or ()))
        if DATA_KEY not in content or MODEL_KEY not in content:
            raise UserError(
                f"checkpoint '{path}' does not describe its data and model (it was not "
                "written by this project's train, or by an older version); retrain, or "
                "load its weights with init_from="
            )
        check_targets(content[DATA_KEY], str(path), checkpoint.allowed)
        check_targets(content[MODEL_KEY], str(path), checkpoint.allowed)
        check_targets(content.get("hyper_parameters", {}), str(path), checkpoint.allowed)
        return checkpoint

    @property
    def info(self) -> DataInfo:
        return DataInfo.from_dict(self.content[DATA_KEY]["info"])

    @property
    def normalization(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The train split's mean and std the model was trained behind (identity if none)."""
        card = self.content[DATA_KEY]
        return card.get("mean", torch.zeros(())), card.get("std", torch.ones(()))

    @property
    def data_settings(self) -> dict[str, Any]:
        return dict(self.content[DATA_KEY].get("args", {}))

    def model(self) -> LightningModule:
        """The LightningModule rebuilt from the checkpoint's hyperparameters, weights loaded."""
        target = self.content[MODEL_KEY]["_target_"]
        try:
            model_class = get_class(target)
            model = model_class(**self.content.get("hyper_parameters", {}))
        except Exception as error:  # what a foreign constructor raises is not ours to type
            raise UserError(
                f"checkpoint '{self.path}' cannot rebuild its model {target} "
                f"({first_line(error)}); pass a checkpoint written by this project's train"
            ) from error
        load_weights(model, self.content, self.path)
        return model.eval()

    def datamodule(self, overrides: Mapping[str, Any] | None = None) -> LightningDataModule:
        """The run's data module, set up, with its stored settings (``overrides`` win, warned)."""
        card = self.content[DATA_KEY]
        settings = self.data_settings
        for key, value in (overrides or {}).items():
            if settings.get(key) != value:
                log.warning(
                    "data.%s=%s overrides the checkpoint's %s", key, value, settings.get(key)
                )
            settings[key] = value
        check_targets(settings, str(self.path), self.allowed)
        try:
            datamodule = instantiate({"_target_": card["_target_"], **settings})
        except Exception as error:
            cause = error.__cause__ if isinstance(error.__cause__, UserError) else None
            raise cause or UserError(
                f"checkpoint '{self.path}' cannot rebuild its data module {card['_target_']} "
                f"({first_line(error)}); pass data.<setting>=... to fix the stored settings"
            ) from error
        try:
            datamodule.prepare_data()
            datamodule.setup("test")
        except UserError as error:
            stored = {k: v for k, v in card.get("args", {}).items() if k in ("path", "root")}
            raise UserError(
                f"the checkpoint's data ({stored or card['_target_']}) cannot be read: {error}; "
                "if it moved, pass its new place, e.g. data.path=... or data.root=..."
            ) from error
        return datamodule
