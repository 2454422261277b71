"""Run an exported ``model.onnx`` with onnxruntime: numpy in, numpy out, no torch.

The file carries its own ``DataInfo`` (input shape, class names, feature columns, image
background) in its metadata, so predict and a model server need nothing else.
"""

import json
import os
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime

from platekit._errors import UserError, first_line
from platekit.data._info import DataInfo

Outputs = tuple[np.ndarray, ...]
INFO_KEY = "data_info"  # the exported model's metadata entry holding the DataInfo as JSON
CLASS_OUTPUTS = ("logits", "probabilities")
VALUE_OUTPUTS = ("values",)


class Runner(Protocol):
    """What predict and export call: raw inputs in, outputs out, and what the inputs are."""

    info: DataInfo

    def __call__(self, inputs: np.ndarray) -> Outputs: ...


def output_names(target_kind: str) -> tuple[str, ...]:
    """The exported model's outputs: logits and probabilities, or values for a regression."""
    return CLASS_OUTPUTS if target_kind == "class" else VALUE_OUTPUTS


class OnnxRunner:
    """An onnxruntime CPU session over a ``model.onnx`` written by the export."""

    def __init__(self, path: str | Path, threads: int | None = None) -> None:
        options = onnxruntime.SessionOptions()
        # Export passes PyTorch's thread count, so latencies compare like with like.
        options.intra_op_num_threads = threads or default_threads()
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
        try:
            self.info = DataInfo.from_dict(json.loads(metadata[INFO_KEY]), f"ONNX model '{path}'")
        except (ValueError, TypeError) as error:  # json's errors are ValueErrors too
            raise UserError(
                f"{first_line(error, 400)}; pass a model.onnx written by this project's export"
            ) from None
        self.input_name = self.session.get_inputs()[0].name
        self.outputs = list(output_names(self.info.target_kind))
        check_graph(self.session, self.info, self.outputs, Path(path).name)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.info.input_shape

    def __call__(self, inputs: np.ndarray) -> Outputs:
        return tuple(self.session.run(self.outputs, {self.input_name: inputs}))


def check_graph(
    session: onnxruntime.InferenceSession, info: DataInfo, outputs: list[str], name: str
) -> None:
    """The metadata's input shape, outputs and class count are those of the graph itself.

    A model.onnx whose metadata disagrees with its graph would fail (or be misread) on every
    input; it is refused when loaded, in one line.
    """
    [graph_input] = session.get_inputs()
    graph_shape = list(graph_input.shape[1:])  # after the batch axis
    said = list(info.input_shape)
    fixed = [
        axis
        for axis, (dim, size) in enumerate(zip(graph_shape, said, strict=False))
        if isinstance(dim, int) and dim != size and axis not in info.varying_axes
    ]
    if len(graph_shape) != len(said) or fixed:
        raise UserError(
            f"ONNX model '{name}': its metadata says inputs of shape {tuple(said)}, its graph "
            f"takes {tuple(graph_shape)}; re-export it (make export CKPT=...)"
        )
    given = {output.name: output.shape for output in session.get_outputs()}
    missing = [output for output in outputs if output not in given]
    if missing:
        raise UserError(
            f"ONNX model '{name}' has no output {missing[0]!r} (its outputs: "
            f"{', '.join(sorted(given))[:200]}); re-export it (make export CKPT=...)"
        )
    if info.target_kind == "class":
        width = (given[outputs[-1]] or [None])[-1]
        if isinstance(width, int) and width != len(info.class_names):
            raise UserError(
                f"ONNX model '{name}': its metadata names {len(info.class_names)} classes, its "
                f"graph gives {width} probabilities; re-export it (make export CKPT=...)"
            )


def default_threads() -> int:
    """``OMP_NUM_THREADS`` if set (the project's commands set it), else every core."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1
