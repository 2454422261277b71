"""Networks (plain ``nn.Module``) and the LightningModule that trains them.

Names are imported on first use, so ``models.onnx_runner`` loads without torch.
"""

from importlib import import_module
from typing import Any

EXPORTS = {"Classifier": ".classifier", "MLP": ".nets", "SmallCNN": ".nets"}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(EXPORTS[name], __name__), name)
