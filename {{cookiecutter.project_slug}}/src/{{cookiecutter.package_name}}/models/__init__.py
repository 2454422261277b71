"""Networks (plain ``nn.Module``), the tasks they learn and the LightningModule that trains them."""

from .nets import MLP, SmallCNN
from .task_module import TaskModule
from .tasks import Classification, Regression, Task

__all__ = ["MLP", "Classification", "Regression", "SmallCNN", "Task", "TaskModule"]
