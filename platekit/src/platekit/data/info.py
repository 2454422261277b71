"""What the rest of the project knows about the data: plain values, no torch.

Stored in every checkpoint and in the exported model's metadata, so predict and a model
server read it without importing torch.
"""

from dataclasses import asdict, dataclass, field
from typing import Any


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

    @property
    def num_classes(self) -> int | None:
        return len(self.class_names) if self.target_kind == "class" else None

    @property
    def num_outputs(self) -> int:
        """Values the model predicts per input: one per class, or one for a regression."""
        return len(self.class_names) if self.target_kind == "class" else 1

    def to_dict(self) -> dict[str, Any]:
        plain = asdict(self)
        plain["input_shape"] = list(self.input_shape)
        plain["class_names"] = list(self.class_names)
        plain["feature_names"] = list(self.feature_names)
        return plain

    @classmethod
    def from_dict(cls, plain: dict[str, Any]) -> "DataInfo":
        known = {name: plain[name] for name in cls.__dataclass_fields__ if name in plain}
        for name in ("input_shape", "class_names", "feature_names"):
            if name in known:
                known[name] = tuple(known[name])
        return cls(**known)
