"""The tasks a net learns, the LightningModule that trains it, its learning-rate schedules,
and the model rebuilt from a checkpoint for export.

Names are imported on first use, so the ONNX runner loads without torch.
"""

from platekit._lazy import lazy_exports

EXPORTS = {
    "Classification": "._tasks",
    "Regression": "._tasks",
    "Task": "._tasks",
    "TaskModule": "._task_module",
    "SequenceGRU": "._sequence",
    "build_model": "._build",
    "from_checkpoint": "._exportable",
    "Constant": "._schedules",
    "Cosine": "._schedules",
    "OneCycle": "._schedules",
    "StepDecay": "._schedules",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
