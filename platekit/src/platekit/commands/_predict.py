"""Predict with a checkpoint or an exported model.onnx, on arrays, tables or images.

python -m <package>.predict model_path=outputs/export/runs/<time>/model.onnx inputs=x.npy
python -m <package>.predict model_path=path/to/last.ckpt inputs=[a.png,images/] invert=true
python -m <package>.predict model_path=model.onnx inputs=new_rows.csv

Both backends take the same raw inputs and give the same predictions; the output is CSV
or JSON (by the suffix of ``output_path``) with one row per input: the input, then its class
index, class name and probability (a classifier) or its predicted value (a regression).
"""

import csv
import io
import logging
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, ListConfig

from platekit._errors import UserError, inert
from platekit._files import json_text, write_atomic
from platekit.config._nodes import save_config
from platekit.config._rules import either, flag, integer, list_of, null_or, text
from platekit.config._schema import declare
from platekit.data._images import MAX_PIXELS
from platekit.data._info import DataInfo
from platekit.data._inputs import read_inputs
from platekit.data._ranges import MARGIN, outside, summary
from platekit.models._onnx_runner import OnnxRunner, Runner

log = logging.getLogger(__name__)

declare(
    {
        "model_path": text("outputs/export/runs/<time>/model.onnx"),
        "inputs": either(text("x.npy"), list_of(text("x.npy"), example="[a.png,more/]")),
        "output_path": text("out.csv"),
        "npz_key": null_or(text("x")),
        "invert": flag(),
        "batch_size": integer(1, example=512),
        "max_image_pixels": integer(1, example=16777216),
    }
)

FORMATS = (".csv", ".json")


def predict(cfg: DictConfig) -> list[dict[str, Any]]:
    """Write one prediction per input row to ``cfg.output_path``; return the rows."""
    output = Path(cfg.output_path)
    if output.suffix.lower() not in FORMATS:
        raise UserError(f"output_path '{output}' must end in {' or '.join(FORMATS)}")
    if cfg.batch_size < 1:
        raise UserError(f"batch_size={cfg.batch_size} must be >= 1; e.g. batch_size=512")
    runner = open_model(cfg)
    paths = list(cfg.inputs) if isinstance(cfg.inputs, ListConfig | list) else [cfg.inputs]
    inputs, names = read_inputs(
        paths,
        runner.info,
        npz_key=cfg.get("npz_key"),
        invert=cfg.invert,
        max_pixels=cfg.get("max_image_pixels", MAX_PIXELS),
    )
    save_config(cfg)  # no seeding: a prediction draws no random numbers
    outputs = in_batches(runner, inputs, cfg.batch_size)
    rows = prediction_rows(names, outputs, runner.info)
    flags = range_flags(inputs, runner.info)
    if flags is not None:
        for row, flag in zip(rows, flags, strict=True):
            row[OUTSIDE] = flag
    write_predictions(output, rows)
    log.info("%d predictions: %s", len(rows), output)
    return rows


def open_model(cfg: DictConfig) -> Runner:
    """onnxruntime for a ``.onnx`` file, PyTorch for a training checkpoint.

    torch and Lightning are imported only for a checkpoint: an ONNX prediction starts in
    the time numpy, onnxruntime and Hydra take to import.
    """
    if not cfg.get("model_path"):
        raise UserError("model_path is not set; pass model_path=path/to/model.onnx or a .ckpt")
    path = str(cfg.model_path)
    if path.endswith(".onnx"):
        if not Path(path).is_file():
            raise UserError(f"model '{path}' does not exist; run the export first")
        return OnnxRunner(path)
    from platekit._registry import trust
    from platekit.checkpoints._restore import Checkpoint
    from platekit.models._exportable import from_checkpoint
    from platekit.models._runners import TorchRunner

    trust(cfg.get("trusted_classes"))  # classes a checkpoint may name
    checkpoint = Checkpoint.open(path)
    return TorchRunner(from_checkpoint(checkpoint), checkpoint.info)


def in_batches(runner: Runner, inputs: np.ndarray, size: int) -> np.ndarray:
    """The last output (probabilities or values) of every row, ``size`` rows at a time."""
    chunks = np.array_split(inputs, -(-len(inputs) // size))  # ceil(N / size) chunks
    return np.concatenate([runner(chunk)[-1] for chunk in chunks])


OUTSIDE = "outside_training_range"  # a column of predict's rows, a check of serve's answers


def range_flags(inputs: np.ndarray, info: DataInfo) -> list[str] | None:
    """Per input row, what lies outside the training range ('' if nothing), said in one line;
    None, with a line saying so, for a model that records no range."""
    if not info.input_range:
        log.info(
            "inputs are not checked against a training range: the model records none "
            "(trained before platekit 0.3, or sequences)"
        )
        return None
    flags = outside(inputs, info.input_range, info.feature_names)
    flagged = summary(flags)
    if flagged["count"]:
        first = next(flag for flag in flags if flag)
        log.warning(
            "%d of %d rows hold inputs outside the training range by more than %d%% of it "
            "(rows %s%s; e.g. %s): their answers are extrapolations; check the inputs' scale",
            flagged["count"],
            len(flags),
            round(MARGIN * 100),
            ", ".join(map(str, flagged["rows"])),
            ", ..." if flagged["count"] > len(flagged["rows"]) else "",
            inert(first),
        )
    return flags


def prediction_rows(names: list[str], outputs: np.ndarray, info: DataInfo) -> list[dict[str, Any]]:
    """One row per input: class index, name and probability, or the predicted value."""
    if info.target_kind != "class":
        return [{"input": n, "value": float(v[0])} for n, v in zip(names, outputs, strict=True)]
    return [
        {
            "input": name,
            "class": int(p.argmax()),
            "class_name": info.class_names[int(p.argmax())],
            "probability": float(p.max()),
        }
        for name, p in zip(names, outputs, strict=True)
    ]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as a formula


def as_text_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as the text it is: a text starting like a formula (a class
    or file name from someone else: ``=cmd|' /C calc'!A0``) gets a leading ``'``; a number
    (``-1``) stays as it is."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    if value.startswith(("\t", "\r")):
        return "'" + value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def write_predictions(path: Path, rows: list[dict[str, Any]]) -> None:
    """CSV with a header row, or a JSON list of objects, written atomically."""
    if path.suffix.lower() == ".json":
        text = json_text(rows, sort_keys=False)
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=[as_text_cell(name) for name in rows[0]])
        writer.writeheader()
        writer.writerows([{as_text_cell(k): as_text_cell(v) for k, v in r.items()} for r in rows])
        text = buffer.getvalue()
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
