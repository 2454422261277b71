"""Networks (plain ``nn.Module``), the tasks they learn and the LightningModule that trains them.

Names are imported on first use, so ``models.onnx_runner`` loads without torch.
"""

from ..runtime.lazy import lazy_exports

EXPORTS = {
    "Classification": ".tasks",
    "MLP": ".nets",
    "Regression": ".tasks",
    "SmallCNN": ".nets",
    "Task": ".tasks",
    "TaskModule": ".task_module",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
