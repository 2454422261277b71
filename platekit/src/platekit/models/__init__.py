"""The tasks a net learns, the LightningModule that trains it, schedules and the shipped model.

Names are imported on first use, so ``models.onnx_runner`` loads without torch.
"""

from ..runtime.lazy import lazy_exports

EXPORTS = {
    "Classification": ".tasks",
    "Regression": ".tasks",
    "SequenceGRU": ".sequence",
    "Task": ".tasks",
    "TaskModule": ".task_module",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
