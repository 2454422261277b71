"""The tasks a net learns, the LightningModule that trains it and its learning-rate schedules.

Names are imported on first use, so the ONNX runner loads without torch.
"""

from typing import TYPE_CHECKING

from platekit._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them, imported eagerly
    from platekit.models._build import build_model as build_model
    from platekit.models._schedules import Constant as Constant
    from platekit.models._schedules import Cosine as Cosine
    from platekit.models._schedules import OneCycle as OneCycle
    from platekit.models._schedules import StepDecay as StepDecay
    from platekit.models._sequence import SequenceGRU as SequenceGRU
    from platekit.models._task_module import TaskModule as TaskModule
    from platekit.models._tasks import Classification as Classification
    from platekit.models._tasks import Regression as Regression
    from platekit.models._tasks import Task as Task

EXPORTS = {
    "Classification": "._tasks",
    "Regression": "._tasks",
    "Task": "._tasks",
    "TaskModule": "._task_module",
    "SequenceGRU": "._sequence",
    "build_model": "._build",
    "Constant": "._schedules",
    "Cosine": "._schedules",
    "OneCycle": "._schedules",
    "StepDecay": "._schedules",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
