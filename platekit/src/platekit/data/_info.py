"""What the rest of the project knows about the data: plain values, no torch.

Stored in every checkpoint and in the exported model's metadata, so predict and a model
server read it without importing torch.
"""

from dataclasses import asdict, dataclass, field
from math import isfinite, prod
from typing import Any

MAX_INPUT_VALUES = 3 * 4096 * 4096  # what one input may hold (predict's largest image)


@dataclass(frozen=True)
class DataInfo:
    """What the rest of the project knows about the data; stored in every checkpoint."""

    input_shape: tuple[int, ...]
    target_kind: str  # "class" or "value"
    class_names: tuple[str, ...] = ()
    input_name: str = "inputs"  # the exported model's input name
    input_description: str = ""
    feature_names: tuple[str, ...] = ()  # tabular data: the column of each feature
    background: float | None = None  # images: mean raw value of the border pixels
    split_sizes: dict[str, int] = field(default_factory=dict)
    # tabular data: how each raw column becomes features (data/_encoding.py), plain dicts
    table_columns: tuple[dict[str, Any], ...] = ()
    # Variable-length inputs: axis of one input -> the largest size allowed (None: any).
    # ``input_shape`` holds the size training padded that axis to; shorter inputs are
    # padded with ``padding_value``, which the net reads as "past the end" (its lengths).
    varying_axes: dict[int, int | None] = field(default_factory=dict)
    padding_value: float | None = None
    vocab_size: int | None = None  # token inputs: integer ids in [0, vocab_size)
    # The raw train split's range per feature or channel (data/_ranges.py); {}: not recorded.
    input_range: dict[str, Any] = field(default_factory=dict)

    @property
    def num_classes(self) -> int | None:
        return len(self.class_names) if self.target_kind == "class" else None

    @property
    def varying_axis(self) -> int | None:
        """The axis of one input whose size varies (a sequence's length), if any."""
        return next(iter(self.varying_axes), None)

    @property
    def num_outputs(self) -> int:
        """Values the model predicts per input: one per class, or one for a regression."""
        return len(self.class_names) if self.target_kind == "class" else 1

    def to_dict(self) -> dict[str, Any]:
        plain = asdict(self)
        plain["input_shape"] = list(self.input_shape)
        plain["class_names"] = list(self.class_names)
        plain["feature_names"] = list(self.feature_names)
        plain["table_columns"] = [dict(column) for column in self.table_columns]
        plain["varying_axes"] = {str(axis): size for axis, size in self.varying_axes.items()}
        return plain

    @classmethod
    def from_dict(cls, plain: dict[str, Any], source: str = "the data card") -> "DataInfo":
        """The metadata a checkpoint or an exported model stores, checked.

        Raises:
            ValueError: one line naming what is wrong (a file can be edited by anyone).
        """
        known = {name: plain[name] for name in cls.__dataclass_fields__ if name in plain}
        for name in ("input_shape", "class_names", "feature_names", "table_columns"):
            if name in known:
                if not isinstance(known[name], list | tuple):
                    raise ValueError(f"{source}: {name} is not a list")
                known[name] = tuple(known[name])
        if "varying_axes" in known:
            known["varying_axes"] = axes_from_plain(known["varying_axes"], source)
        info = cls(**known)
        info.check(source)
        return info

    def check(self, source: str) -> None:
        """Raise ValueError unless every field holds a value the commands can use."""
        shape = self.input_shape
        if not shape or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape
        ):
            raise ValueError(f"{source}: input_shape {list(shape)} is not a list of sizes >= 1")
        if prod(shape) > MAX_INPUT_VALUES:  # the metadata is bounded like an uploaded image
            raise ValueError(
                f"{source}: input_shape {list(shape)} holds {prod(shape)} values an input, over "
                f"{MAX_INPUT_VALUES} (a 3 x 4096 x 4096 image, the largest input)"
            )
        if self.target_kind not in ("class", "value"):
            raise ValueError(f"{source}: target_kind {self.target_kind!r} is not class or value")
        if self.target_kind == "class" and (
            len(self.class_names) < 1 or not all(isinstance(n, str) for n in self.class_names)
        ):
            raise ValueError(f"{source}: a classifier needs one class name per output")
        if self.feature_names and (
            len(self.feature_names) != prod(shape)
            or not all(isinstance(n, str) for n in self.feature_names)
        ):
            raise ValueError(
                f"{source}: {len(self.feature_names)} feature names for inputs of shape "
                f"{list(shape)}"
            )
        if self.table_columns:
            from platekit.data._encoding import check_columns

            check_columns(self.table_columns, prod(shape), source)
        check_varying(self, source)
        check_vocab(self, source)
        from platekit.data._ranges import check_range

        check_range(self.input_range, self.input_shape, source)
        if self.background is not None and not (
            isinstance(self.background, int | float) and isfinite(self.background)
        ):
            raise ValueError(f"{source}: background {self.background!r} is not a finite number")


def is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def axes_from_plain(value: object, source: str) -> dict[int, int | None]:
    """``{"0": 40}`` as JSON and checkpoints store it -> ``{0: 40}``."""
    if not isinstance(value, dict):
        raise ValueError(f"{source}: varying_axes is not a mapping of axis to maximum size")
    axes: dict[int, int | None] = {}
    for key, size in value.items():
        if not str(key).isdigit():
            raise ValueError(f"{source}: varying_axes has axis {key!r}; axes are 0, 1, ...")
        axes[int(key)] = size
    return axes


def check_varying(info: DataInfo, source: str) -> None:
    """One varying axis at most, inside the input, with a padding value and sane limits."""
    axes = info.varying_axes
    if not axes:
        return
    if len(axes) > 1:
        raise ValueError(f"{source}: varying_axes {dict(axes)} names several axes; one may vary")
    ((axis, limit),) = axes.items()
    if not 0 <= axis < len(info.input_shape):
        raise ValueError(
            f"{source}: varying axis {axis} is outside inputs of shape {list(info.input_shape)}"
        )
    if limit is not None and not is_size(limit):
        raise ValueError(f"{source}: varying axis {axis} has maximum {limit!r}; give a size >= 1")
    if limit is not None and info.input_shape[axis] > limit:
        raise ValueError(
            f"{source}: inputs were padded to {info.input_shape[axis]} along axis {axis}, over "
            f"its maximum {limit}"
        )
    if not isinstance(info.padding_value, int | float) or not isfinite(info.padding_value):
        raise ValueError(f"{source}: varying axes need a finite padding_value")


def check_vocab(info: DataInfo, source: str) -> None:
    """Token inputs: a vocabulary size that holds the padding value, if there is one."""
    if info.vocab_size is None:
        return
    padding = info.padding_value if info.padding_value is not None else 0
    if not is_size(info.vocab_size) or not 0 <= padding < info.vocab_size:
        raise ValueError(
            f"{source}: vocab_size {info.vocab_size!r} must be a size >= 1 holding the "
            f"padding value {padding}"
        )
