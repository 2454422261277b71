"""Run the shipped model with PyTorch, on the numpy inputs the ONNX runner takes too.

:class:`TorchRunner` and :class:`~.onnx_runner.OnnxRunner` take raw inputs
``(N, *input_shape)`` float32, return the model's outputs as numpy arrays (``logits,
probabilities`` or ``values``) and carry the data's ``DataInfo``: callers swap them freely.
"""

import numpy as np
import torch

from platekit.data._info import DataInfo
from platekit.models._exportable import RawInputModel
from platekit.models._onnx_runner import Outputs

__all__ = ["Outputs", "TorchRunner"]


class TorchRunner:
    """The PyTorch model in eval mode, without autograd."""

    def __init__(self, model: RawInputModel, info: DataInfo) -> None:
        self.model = model.eval()
        self.info = info

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.info.input_shape

    def __call__(self, inputs: np.ndarray) -> Outputs:
        with torch.inference_mode():
            outputs = self.model(torch.from_numpy(inputs))
        return tuple(output.numpy() for output in outputs)
