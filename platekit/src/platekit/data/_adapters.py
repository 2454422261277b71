"""What the project reads from any data module: the contract's metadata, or a plain one's.

A :class:`~.base.BaseDataModule` describes itself fully. A plain ``LightningDataModule``
still trains: its input shape is what it declares (``input_shape``, ``varying_axes``,
``padding_value``, ``vocab_size`` attributes), else its train dataset's first item's;
its classes from ``num_classes`` /
``class_names`` attributes or the model config; what it cannot give is named in one warning.
"""

import logging
from typing import Any, TypeGuard

import torch
from lightning import LightningDataModule
from torch.utils.data import IterableDataset

from platekit._errors import UserError
from platekit.data._base import ALL, BaseDataModule
from platekit.data._info import DataInfo
from platekit.data._padding import shape_text

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
    axes = declared_axes(datamodule)
    shape = getattr(datamodule, "input_shape", None)
    if shape is None:
        shape = first_item_shape(datamodule, axes)
    kind = declared(datamodule, "target_kind") or "class"
    if kind not in ("class", "value"):
        raise UserError(
            f"data module {name} declares target_kind={kind!r}; declare target_kind = "
            '"class" (class indices) or "value" (one real value per row)'
        )
    check_targets(datamodule, kind)
    names = getattr(datamodule, "class_names", None)
    classes = getattr(datamodule, "num_classes", None) or (len(names) if names else num_classes)
    if kind == "class" and not classes:
        raise UserError(
            f"data module {name} has no num_classes or class_names; define num_classes on "
            'it (or target_kind = "value" for a regression), or set model.task.num_classes'
        )
    class_names: tuple[str, ...] = ()
    if kind == "class" and classes:
        class_names = tuple(names) if names else tuple(str(i) for i in range(int(classes)))
    info = DataInfo(
        input_shape=tuple(int(n) for n in shape),
        target_kind=kind,
        class_names=class_names,
        varying_axes=axes,
        padding_value=float(getattr(datamodule, "padding_value", 0.0)) if axes else None,
        vocab_size=declared(datamodule, "vocab_size"),
    )
    try:
        info.check(f"data module {name}")
    except ValueError as error:
        raise UserError(
            f"{error}; fix what {name} declares (input_shape, varying_axes, padding_value, "
            "vocab_size)"
        ) from None
    what = shape_text(info) if axes else f"(N, {', '.join(map(str, shape))})"
    return DataInfo(**{**info.__dict__, "input_description": f"float32 {what}: what {name} yields"})


SAMPLED_ITEMS = 32  # items of a plain module's dataset compared for their shapes


SUPPORTED_TARGETS = (
    "one target per row: a class index (int64) for a classification, or one real value "
    '(float, with target_kind = "value") for a regression; several targets need a model each'
)


def check_targets(datamodule: LightningDataModule, kind: str) -> None:
    """A plain module's first train target: one per row, of the kind it declares."""
    name = type(datamodule).__name__
    dataset = getattr(datamodule.train_dataloader(), "dataset", None)
    if isinstance(dataset, IterableDataset) or not hasattr(dataset, "__getitem__"):
        return  # no first item to look at: the task checks each batch
    try:
        item = dataset[0]  # type: ignore[index]
    except (IndexError, KeyError, TypeError):
        return
    target = item[1] if isinstance(item, tuple | list) and len(item) > 1 else None
    if not isinstance(target, torch.Tensor | int | float):
        return
    value = torch.as_tensor(target)
    if value.numel() != 1:
        raise UserError(
            f"data module {name} gives targets of shape {tuple(value.shape)} per row; "
            f"supported: {SUPPORTED_TARGETS}"
        )
    if kind == "class" and value.is_floating_point():
        raise UserError(
            f"data module {name} gives float targets (e.g. {float(value):.4g}) but declares "
            'no target_kind: for a regression declare target_kind = "value" on it; for '
            "classes give int64 class indices"
        )


def declared(datamodule: LightningDataModule, name: str) -> Any:
    """What a plain module declares as ``name``: an attribute, or a method's answer."""
    value = getattr(datamodule, name, None)
    return value() if callable(value) else value


def declared_axes(datamodule: LightningDataModule) -> dict[int, int | None]:
    """A plain module's ``varying_axes`` (an attribute or a method), e.g. ``{0: 40}``."""
    axes = declared(datamodule, "varying_axes")
    if axes is None:
        return {}
    if not isinstance(axes, dict) or not all(isinstance(axis, int) for axis in axes):
        raise UserError(
            f"data module {type(datamodule).__name__} declares varying_axes={axes!r}; declare "
            "a dict of axis -> largest size (None: any), e.g. {0: 40}"
        )
    return dict(axes)


def first_item_shape(
    datamodule: LightningDataModule, axes: dict[int, int | None]
) -> tuple[int, ...]:
    """A plain module's input shape from its map-style train dataset's first item (never from
    a shuffled, padded batch), its first items compared so that a varying size is declared.

    A varying axis with a declared maximum takes that size (the model's largest input).
    """
    name = type(datamodule).__name__
    dataset = getattr(datamodule.train_dataloader(), "dataset", None)
    if isinstance(dataset, IterableDataset) or not (
        hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")
    ):
        raise UserError(
            f"data module {name}: the input shape cannot be known (its train dataset is not "
            "map-style, so it has no first item); declare it on the module: input_shape = "
            "(...), and varying_axes = {axis: max} if a size varies"
        )
    count = min(len(dataset), SAMPLED_ITEMS)  # type: ignore[arg-type]
    if count == 0:
        raise UserError(f"data module {name}: its train dataset is empty; give it data")
    shapes = [item_shape(dataset[index], name) for index in range(count)]  # type: ignore[index]
    first = list(shapes[0])
    for axis in range(len(first)):
        sizes = sorted({shape[axis] for shape in shapes if len(shape) == len(first)})
        if len(sizes) > 1 and axis not in axes:
            raise UserError(
                f"data module {name}: its inputs differ in size along axis {axis} (sizes "
                f"{sizes[0]} to {sizes[-1]} among its first {count} items); declare it on the "
                f"module: varying_axes = {declaration(axis)} (and "
                "padding_value), so the model, export and predict take every size"
            )
    if len({len(shape) for shape in shapes}) > 1:
        raise UserError(f"data module {name}: its inputs differ in their number of dimensions")
    for axis, limit in axes.items():
        if limit is not None and 0 <= axis < len(first):
            first[axis] = limit
    return tuple(first)


def declaration(axis: int) -> str:
    """``{0: <largest size, or None>}``: what a module declares for a varying ``axis``."""
    return "{" + f"{axis}: <largest size, or None>" + "}"


def item_shape(item: Any, name: str) -> tuple[int, ...]:
    """The shape of one dataset item's input: the item, or the first of a pair."""
    inputs = item[0] if isinstance(item, tuple | list) else item
    shape = getattr(inputs, "shape", None)
    if shape is None:
        raise UserError(
            f"data module {name}: a dataset item's input is {type(inputs).__name__}, not a "
            "tensor; yield (input tensor, target) pairs or declare input_shape"
        )
    return tuple(int(n) for n in shape)


def warn_if_plain(datamodule: LightningDataModule) -> None:
    """One warning at the start of a run naming what a plain data module does not give."""
    if is_contract(datamodule):
        return
    log.warning(
        "data module %s is not a BaseDataModule (data/_base.py): it trains and Lightning "
        "shards it under DDP, but a run resumed mid-epoch continues at the checkpoint's "
        "step with the loader started over (the rest of that epoch takes the first batches "
        "of a new pass, so some of its rows are trained on twice and others not at all), "
        "and export checks parity on its test batches as they are (no raw inputs, no "
        "normalisation baked in); subclass BaseDataModule for an exact resume and an "
        "export that takes raw inputs",
        type(datamodule).__name__,
    )


FINGERPRINTS_KEY = "fingerprints"  # split -> fingerprint.py's rows, sha256, set


def data_card(datamodule: LightningDataModule, info: DataInfo) -> dict[str, Any]:
    """What a checkpoint stores to rebuild and describe its data: plain containers, tensors."""
    from platekit._registry import active  # the registry imports the data package

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
    if isinstance(datamodule, BaseDataModule) and datamodule.parts:  # what it holds, per split
        splits = list(datamodule.parts)
        if datamodule.rows is not None and isinstance(datamodule.rows.inputs, torch.Tensor):
            splits.append(ALL)  # in memory already: tells a reordered table from an edited one
        card[FINGERPRINTS_KEY] = {split: datamodule.fingerprint(split) for split in splits}
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
