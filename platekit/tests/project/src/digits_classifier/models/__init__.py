"""This project's nets: plain ``nn.Module``s, sized by the data (``input_shape``, ``num_outputs``).

The task they learn and the LightningModule that trains them are platekit's
(``platekit.models``); a task of the project's own goes beside the nets.
"""

from .nets import MLP, SmallCNN

__all__ = ["MLP", "SmallCNN"]
