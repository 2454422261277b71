"""Run the shipped model with PyTorch or with onnxruntime, on the same numpy inputs.

Both runners take raw inputs ``(N, *input_shape)`` float32, return the model's outputs as
numpy arrays (``logits, probabilities`` or ``values``) and carry the data's
:class:`~..data.info.DataInfo`, so callers compare or swap them freely.
"""

import json
from pathlib import Path

import numpy as np
import onnxruntime
import torch

from ..cli.errors import UserError, first_line
from ..data.info import DataInfo
from .exportable import RawInputModel, output_names

Outputs = tuple[np.ndarray, ...]
INFO_KEY = "data_info"  # the exported model's metadata entry holding the DataInfo as JSON


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


class OnnxRunner:
    """An onnxruntime CPU session over a ``model.onnx`` written by the export."""

    def __init__(self, path: str | Path, threads: int | None = None) -> None:
        options = onnxruntime.SessionOptions()
        # Same thread count as PyTorch by default, so latencies compare like with like.
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        try:
            self.session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises its own untyped errors
            raise UserError(
                f"'{path}' is not a loadable ONNX model ({first_line(error)}); pass a "
                "model.onnx written by the export"
            ) from error
        metadata = self.session.get_modelmeta().custom_metadata_map
        if INFO_KEY not in metadata or len(self.session.get_inputs()) != 1:
            raise UserError(
                f"ONNX model '{path}' does not describe its input (no '{INFO_KEY}' metadata); "
                "pass a model.onnx written by this project's export"
            )
        self.info = DataInfo.from_dict(json.loads(metadata[INFO_KEY]))
        self.input_name = self.session.get_inputs()[0].name
        self.outputs = list(output_names(self.info.target_kind))

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.info.input_shape

    def __call__(self, inputs: np.ndarray) -> Outputs:
        return tuple(self.session.run(self.outputs, {self.input_name: inputs}))
