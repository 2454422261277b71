"""Networks (plain ``nn.Module``), the tasks they learn and the LightningModule that trains them.

Names are imported on first use, so ``models.onnx_runner`` loads without torch.
"""

from importlib import import_module
from typing import Any

EXPORTS = {
    "Classification": ".tasks",
    "MLP": ".nets",
    "Regression": ".tasks",
    "SmallCNN": ".nets",
    "Task": ".tasks",
    "TaskModule": ".task_module",
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(EXPORTS[name], __name__), name)
