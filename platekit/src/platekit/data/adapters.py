"""What the project reads from any data module: the contract's metadata, or a plain one's.

A :class:`~.base.BaseDataModule` describes itself fully. A plain ``LightningDataModule``
still trains: its input shape is read from a batch and its classes from ``num_classes`` /
``class_names`` attributes or the model config; what it cannot give is named in one warning.
"""

import logging
from typing import Any, TypeGuard

import torch
from lightning import LightningDataModule

from ..cli.errors import UserError
from .base import BaseDataModule
from .info import DataInfo

log = logging.getLogger(__name__)


def is_contract(datamodule: LightningDataModule) -> TypeGuard[BaseDataModule]:
    return isinstance(datamodule, BaseDataModule)


def data_info(datamodule: LightningDataModule, num_classes: int | None = None) -> DataInfo:
    """Set the data module up and describe it; ``num_classes``: the model config's, if set."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    if isinstance(datamodule, BaseDataModule):
        return datamodule.info
    name = type(datamodule).__name__
    shape = getattr(datamodule, "input_shape", None)
    if shape is None:
        inputs = next(iter(datamodule.train_dataloader()))[0]
        shape = tuple(inputs.shape[1:])
    names = getattr(datamodule, "class_names", None)
    classes = getattr(datamodule, "num_classes", None) or (len(names) if names else num_classes)
    if not classes:
        raise UserError(
            f"data module {name} has no num_classes or class_names; define num_classes on "
            "it, or set model.num_classes"
        )
    return DataInfo(
        input_shape=tuple(int(n) for n in shape),
        target_kind="class",
        class_names=tuple(names) if names else tuple(str(i) for i in range(int(classes))),
        input_description=f"float32 (N, {', '.join(map(str, shape))}): what {name} yields",
    )


def warn_if_plain(datamodule: LightningDataModule) -> None:
    """One warning at the start of a run naming what a plain data module does not give."""
    if is_contract(datamodule):
        return
    log.warning(
        "data module %s is not a BaseDataModule (data/base.py): it trains and Lightning "
        "shards it under DDP, but a run resumed mid-epoch continues at the checkpoint's "
        "step with the loader started over (the rest of that epoch takes the first batches "
        "of a new pass, so some of its rows are trained on twice and others not at all), "
        "and export checks parity on its test batches as they are (no raw inputs, no "
        "normalisation baked in); subclass BaseDataModule for an exact resume and an "
        "export that takes raw inputs",
        type(datamodule).__name__,
    )


def data_card(datamodule: LightningDataModule, info: DataInfo) -> dict[str, Any]:
    """What a checkpoint stores to rebuild and describe its data: plain containers, tensors."""
    from ..checkpoints.registry import active  # the registry imports the data package

    args = dict(getattr(datamodule, "hparams", {}) or {})
    mean = getattr(datamodule, "mean", None)
    std = getattr(datamodule, "std", None)
    card: dict[str, Any] = {
        "_target_": active().key(type(datamodule)),
        "args": plain(args),
        "info": info.to_dict(),
        "contract": is_contract(datamodule),
    }
    if isinstance(mean, torch.Tensor | float) and isinstance(std, torch.Tensor | float):
        card["mean"] = torch.as_tensor(mean, dtype=torch.float32)
        card["std"] = torch.as_tensor(std, dtype=torch.float32)
    return card


def plain(value: Any) -> Any:
    """Settings as plain containers, so the checkpoint loads with ``weights_only=True``."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        return plain(OmegaConf.to_container(value, resolve=True))
    return str(value)
