"""Run the shipped model with PyTorch or with onnxruntime, on the same numpy inputs.

Both runners take raw inputs ``(N, *input_shape)`` float32 and return ``(logits,
probabilities)`` as numpy arrays, so callers compare or swap them freely.
"""

from pathlib import Path

import numpy as np
import onnxruntime
import torch

from ..cli.errors import UserError
from .exportable import INPUT_NAME, OUTPUT_NAMES, RawInputClassifier

Outputs = tuple[np.ndarray, np.ndarray]


class TorchRunner:
    """The PyTorch model in eval mode, without autograd."""

    def __init__(self, model: RawInputClassifier, input_shape: tuple[int, ...]) -> None:
        self.model = model.eval()
        self.input_shape = tuple(input_shape)

    def __call__(self, images: np.ndarray) -> Outputs:
        with torch.inference_mode():
            logits, probabilities = self.model(torch.from_numpy(images))
        return logits.numpy(), probabilities.numpy()


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
            first = str(error).strip().splitlines()[0] if str(error).strip() else "unreadable"
            raise UserError(
                f"'{path}' is not a loadable ONNX model ({first}); pass a model.onnx written "
                "by the export"
            ) from error
        [model_input] = self.session.get_inputs()
        if model_input.name != INPUT_NAME:
            raise UserError(
                f"ONNX model '{path}' takes input '{model_input.name}', not '{INPUT_NAME}'; "
                "pass a model.onnx written by this project's export"
            )
        self.input_shape = tuple(model_input.shape[1:])

    def __call__(self, images: np.ndarray) -> Outputs:
        logits, probabilities = self.session.run(list(OUTPUT_NAMES), {INPUT_NAME: images})
        return logits, probabilities
