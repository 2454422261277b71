"""Export a checkpoint to one self-contained ``model.onnx``, then prove it matches PyTorch.

python -m <package>.export ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt

The graph takes raw inputs (normalisation baked in) with a dynamic batch dimension. Before
``model.onnx`` appears, onnxruntime and PyTorch run the same real test inputs at several
batch sizes; the file is kept only if every output agrees within ``tolerance`` plus
``rtol`` times its size (as ``torch.testing.assert_close`` compares) and the predicted
classes match. ``export.json`` beside it records the interface and the results.
"""

import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import torch
from lightning import LightningDataModule
from omegaconf import DictConfig

from platekit._errors import UserError
from platekit._files import write_atomic, write_json
from platekit._registry import trust
from platekit.checkpoints._restore import Checkpoint
from platekit.config._rules import CHECKPOINT, flag, integer, list_of, number, text
from platekit.config._schema import declare
from platekit.data._base import BaseDataModule
from platekit.data._info import DataInfo
from platekit.data._inputs import table_array
from platekit.data._tables import read_table
from platekit.models._exportable import RawInputModel, from_checkpoint
from platekit.models._onnx_runner import INFO_KEY, OnnxRunner, output_names
from platekit.models._runners import TorchRunner
from platekit.training._trainer import data_overrides, prepare_run

log = logging.getLogger(__name__)

declare(
    {
        "ckpt_path": CHECKPOINT,
        "output_path": text("model.onnx"),
        "opset": integer(7, example=18),
        "batch_sizes": list_of(integer(1, example=1), example="[1,7,64]"),
        "tolerance": number(above=0.0, example=1e-4),
        "rtol": number(low=0.0, example=1e-5),
        "repeats": integer(1, example=50),
        "verbose": flag(),  # the ONNX exporter's own progress lines
    }
)

DEFAULT_RTOL = 1e-5  # float32: a few units in the last place of values of any size


def export(cfg: DictConfig) -> dict[str, Any]:
    """Write ``cfg.output_path`` and ``export.json`` beside it; return what the JSON holds."""
    trust(cfg.get("trusted_classes"))  # classes a model or checkpoint may name
    if not cfg.get("ckpt_path"):
        raise UserError("ckpt_path is not set; run e.g. `export ckpt_path=path/to/last.ckpt`")
    check_settings(cfg)
    checkpoint = Checkpoint.open(cfg.ckpt_path)
    model = from_checkpoint(checkpoint)
    info = checkpoint.info
    prepare_run(cfg)
    inputs = parity_rows(checkpoint, data_overrides(cfg), max(cfg.batch_sizes))
    sizes = sorted({min(int(size), len(inputs)) for size in cfg.batch_sizes})
    if sizes[-1] < max(cfg.batch_sizes):
        log.info("the test split has %d rows: parity at batch sizes %s", len(inputs), sizes)

    output = Path(cfg.output_path)
    report: dict[str, Any] = {}

    def export_and_check(tmp: Path) -> None:
        example = torch.from_numpy(inputs[:2])
        export_onnx(model, example, tmp, cfg.opset, info, verbose=cfg.get("verbose", False))
        if info.varying_axes:
            free_varying_axes(tmp, info)
        label_model(tmp, info, checkpoint.path)
        onnx_runner = OnnxRunner(tmp, threads=torch.get_num_threads())
        torch_runner, limits = TorchRunner(model, info), tolerances(cfg)
        rows = compare(torch_runner, onnx_runner, inputs, sizes, cfg.repeats, limits)
        if info.varying_axes:  # the length axis is free too: the same rows, unpadded
            short = shortest_sequence(inputs, info)
            rows += compare(torch_runner, onnx_runner, short, [1], cfg.repeats, limits)
        log.info("parity and latency (ms), PyTorch vs onnxruntime:\n%s", format_table(rows))
        check_parity(rows, *tolerances(cfg))
        report.update(describe(tmp, onnx_runner, cfg, model, rows))

    # Exported and checked under a temporary name: a failure leaves no model.onnx behind.
    write_atomic(output, export_and_check)
    report["model"] = str(output.resolve())
    write_json(output.parent / "export.json", report)
    log.info("model:         %s", output)
    log.info("export report: %s", output.parent / "export.json")
    return report


def parity_rows(checkpoint: Checkpoint, overrides: dict[str, Any], rows: int) -> np.ndarray:
    """Raw inputs to compare PyTorch and onnxruntime on: a table's first ``rows`` rows,
    encoded as predict encodes them (no more of the file is read), else the test split of
    the run that wrote the checkpoint."""
    table = checkpoint.table_path(overrides)
    if table is None:
        return parity_inputs(checkpoint.datamodule(overrides, refuse=False), rows)
    header, cells = read_table(table, limit=rows)
    inputs = table_array(header, cells, checkpoint.info, table)
    log.info("parity on the first %d rows of %s", len(inputs), table)
    if len(inputs) < 2:
        raise UserError(f"{table} holds {len(inputs)} rows; export needs 2 or more for parity")
    return inputs.astype(np.float32)


def parity_inputs(datamodule: LightningDataModule, rows: int) -> np.ndarray:
    """Up to ``rows`` raw test inputs (fewer if the split is smaller): the contract's raw
    rows, else a plain module's test batches as they come."""
    if isinstance(datamodule, BaseDataModule):
        inputs = datamodule.raw_inputs("test", limit=rows)
    else:
        batches, count = [], 0
        for batch in datamodule.test_dataloader():
            batches.append(batch[0])
            count += len(batch[0])
            if count >= rows:
                break
        inputs = pad_batches(batches, datamodule)[:rows]
    if len(inputs) < 2:
        raise UserError(
            f"the test split has {len(inputs)} rows; export needs 2 or more to check parity "
            "(raise data.test_fraction)"
        )
    return inputs.float().numpy()


def pad_batches(batches: list[torch.Tensor], datamodule: LightningDataModule) -> torch.Tensor:
    """A plain module's test batches in one tensor, padded to a common length if they vary."""
    lengths = {tuple(batch.shape[1:]) for batch in batches}
    if len(lengths) == 1:
        return torch.cat(batches)
    from platekit.data._adapters import data_info
    from platekit.data._padding import pad_rows

    info = data_info(datamodule)
    if info.varying_axis is None:
        raise UserError(
            f"the test batches of {type(datamodule).__name__} differ in shape "
            f"({sorted(lengths)}); declare the varying axis (varying_axes = " + "{0: max})"
        )
    return torch.from_numpy(pad_rows([batch.float().numpy() for batch in batches], info)[0])


def shortest_sequence(inputs: np.ndarray, info: DataInfo) -> np.ndarray:
    """The shortest of the padded sequences at its own length: the graph at another length."""
    from platekit.data._padding import check_sequences, step_is_padding

    assert info.varying_axis is not None
    assert info.padding_value is not None
    is_padding = step_is_padding(inputs, info.varying_axis + 1, info.padding_value)
    row = int(is_padding.sum(axis=1).argmax())  # the most padding: the shortest
    return check_sequences(inputs[row : row + 1], None, info, "the test split")


def free_varying_axes(path: Path, info: DataInfo) -> None:
    """Name the varying axes in the graph's input, should the exporter have fixed them.

    In a process that exported another model before, the exporter may declare the example's
    length although the graph (a GRU op, shapes read at run time) takes any: the parity check
    that follows runs it at two lengths, so a graph that truly needs one is never written.
    """
    graph = onnx.load(str(path))
    dims = graph.graph.input[0].type.tensor_type.shape.dim
    fixed = [axis for axis in info.varying_axes if dims[axis + 1].HasField("dim_value")]
    if not fixed:
        return
    for axis in fixed:
        dims[axis + 1].ClearField("dim_value")
        dims[axis + 1].dim_param = "length"
    del graph.graph.value_info[:]  # inferred shapes that may hold the example's length
    onnx.save(graph, str(path))


def label_model(path: Path, info: DataInfo, checkpoint: Path) -> None:
    """Store what the model's input is (the DataInfo) and where it came from in the file."""
    graph = onnx.load(str(path))
    entries = {INFO_KEY: json.dumps(info.to_dict()), "source_checkpoint": str(checkpoint.resolve())}
    for key, value in entries.items():
        graph.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.save(graph, str(path))


def check_settings(cfg: DictConfig) -> None:
    """Reject settings that cannot give a meaningful check, before any work is done."""
    problems = []
    if not cfg.tolerance > 0:
        problems.append(f"tolerance={cfg.tolerance} must be > 0 (1e-4 suits float32)")
    if not tolerances(cfg)[1] >= 0:
        problems.append(f"rtol={cfg.get('rtol')} must be >= 0 (1e-5 suits float32)")
    if not cfg.batch_sizes or min(cfg.batch_sizes) < 1:
        problems.append(f"batch_sizes={list(cfg.batch_sizes or [])} must be positive integers")
    if cfg.repeats < 1:
        problems.append(f"repeats={cfg.repeats} must be >= 1")
    if problems:
        raise UserError("; ".join(problems) + "; fix them in configs/export.yaml or on the CLI")


def export_onnx(
    model: RawInputModel,
    example: torch.Tensor,
    path: Path,
    opset: int,
    info: DataInfo,
    *,
    verbose: bool = False,
) -> None:
    """Trace with the current (dynamo) exporter; weights inside the file; batch left free,
    and a sequence's length (``info.varying_axes``).

    ``example`` needs a batch (and a length) of at least 2, or the exporter specialises it.
    ``verbose``: print the exporter's steps; a failure raises either way.
    """
    dims = {0: torch.export.Dim("batch")}
    for axis, limit in info.varying_axes.items():  # a sequence's length: free up to its limit
        dims[axis + 1] = (
            torch.export.Dim("length", max=limit) if limit else torch.export.Dim("length")
        )
    # Quiet the exporter's per-pass INFO lines and its warnings about torchvision ops.
    for name in ("onnx_ir", "onnxscript", "torch.onnx._internal.exporter._registration"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        # A dynamic length: torch's own size checks and its RNN weights' bookkeeping.
        warnings.filterwarnings("ignore", message=".*_check_is_size.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*assigned during export.*")
        torch.onnx.export(
            model,
            (example,),
            str(path),
            dynamo=True,
            input_names=[info.input_name],
            output_names=list(output_names(info.target_kind)),
            dynamic_shapes=(dims,),
            external_data=False,
            opset_version=opset,
            verbose=verbose,
        )


def tolerances(cfg: DictConfig) -> tuple[float, float]:
    """The absolute and relative tolerance of the parity check (``rtol`` defaults to 1e-5)."""
    return float(cfg.tolerance), float(cfg.get("rtol", DEFAULT_RTOL))


def within_tolerance(
    expected: tuple[np.ndarray, ...], actual: tuple[np.ndarray, ...], atol: float, rtol: float
) -> bool:
    """Whether every ``|actual - expected| <= atol + rtol * |expected|``; NaN never is.

    The relative part is what lets a regression in dollars (outputs near 2e5, where float32
    steps are 0.0156) pass while a classifier's probabilities are held to ``atol``.
    """
    with np.errstate(invalid="ignore"):
        return all(
            bool(np.all(np.abs(a - e) <= atol + rtol * np.abs(e)))
            for e, a in zip(expected, actual, strict=True)
        )


def compare(
    torch_runner: TorchRunner,
    onnx_runner: OnnxRunner,
    inputs: np.ndarray,
    batch_sizes: list[int],
    repeats: int,
    tolerance: tuple[float, float] = (1e-4, 1e-5),
) -> list[dict[str, Any]]:
    """One row per batch size: largest output difference (absolute and relative), whether
    every output is within ``tolerance`` (atol, rtol), class agreement, latencies."""
    rows = []
    for size in batch_sizes:
        batch = inputs[:size]
        expected, actual = torch_runner(batch), onnx_runner(batch)  # same outputs, same order
        pairs = list(zip(expected, actual, strict=True))
        diff = max(float(np.abs(e - a).max()) for e, a in pairs)
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = max(
                float(np.nanmax(np.abs(e - a) / np.maximum(np.abs(e), 1e-12), initial=0.0))
                for e, a in pairs
            )
        # Regression outputs have no classes; their agreement is the difference alone.
        same_classes = len(expected) == 1 or np.array_equal(
            expected[0].argmax(1), actual[0].argmax(1)
        )
        torch_ms = latency_ms(torch_runner, batch, repeats)
        onnx_ms = latency_ms(onnx_runner, batch, repeats)
        rows.append(
            {
                "batch_size": int(size),
                "input_shape": list(batch.shape[1:]),
                "max_abs_diff": diff,
                "max_rel_diff": relative,
                "within_tolerance": within_tolerance(expected, actual, *tolerance),
                "classes_agree": bool(same_classes),
                "torch_ms_p50": torch_ms[0],
                "torch_ms_p95": torch_ms[1],
                "onnxruntime_ms_p50": onnx_ms[0],
                "onnxruntime_ms_p95": onnx_ms[1],
            }
        )
    return rows


def latency_ms(run: TorchRunner | OnnxRunner, batch: np.ndarray, repeats: int) -> list[float]:
    """Median and 95th percentile of ``repeats`` timed calls, after one warm-up call."""
    run(batch)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run(batch)
        times.append((time.perf_counter() - started) * 1e3)
    return [round(float(q), 4) for q in np.percentile(times, [50, 95])]


def format_table(rows: list[dict[str, Any]]) -> str:
    # Sequences are checked at several lengths too: then a column shows each row's shape.
    shapes = ["x".join(map(str, row.get("input_shape", []))) for row in rows]
    column = "{:>8}  " if len(set(shapes)) > 1 else ""
    lines = [
        f"{'batch':>5}  {column.format('input')}{'max abs diff':>12}  {'classes':>7}  "
        f"{'torch p50':>9}  {'torch p95':>9}  {'ort p50':>9}  {'ort p95':>9}"
    ]
    for row, shape in zip(rows, shapes, strict=True):
        lines.append(
            f"{row['batch_size']:>5}  {column.format(shape)}{row['max_abs_diff']:>12.3g}  "
            f"{'agree' if row['classes_agree'] else 'DIFFER':>7}  "
            f"{row['torch_ms_p50']:>9.3f}  {row['torch_ms_p95']:>9.3f}  "
            f"{row['onnxruntime_ms_p50']:>9.3f}  {row['onnxruntime_ms_p95']:>9.3f}"
        )
    return "\n".join(lines)


def check_parity(rows: list[dict[str, Any]], tolerance: float, rtol: float = DEFAULT_RTOL) -> None:
    """Raise if any batch size has an output beyond ``tolerance + rtol * |output|`` (or NaN),
    or predicts other classes."""
    for row in rows:
        # A row from compare() says whether it is within both tolerances; else the absolute
        # one alone, as `not diff < tolerance` (not `diff >= tolerance`): NaN must fail.
        within = row.get("within_tolerance", row["max_abs_diff"] < tolerance)
        if not within or not row["classes_agree"]:
            relative = row.get("max_rel_diff", float("nan"))
            raise UserError(
                f"ONNX parity failed at batch size {row['batch_size']}: max abs diff "
                f"{row['max_abs_diff']:.3g}, max rel diff {relative:.3g} (tolerance "
                f"{tolerance:g} + rtol {rtol:g} x |output|), classes "
                f"{'agree' if row['classes_agree'] else 'differ'}; no model.onnx was written. "
                "Look for ops the exporter translates differently, or raise tolerance if a "
                "lower precision explains the gap"
            )


def describe(
    path: Path,
    runner: OnnxRunner,
    cfg: DictConfig,
    model: RawInputModel,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """What a user of the ONNX file needs to know, and the evidence that it is faithful."""
    graph = onnx.load(str(path), load_external_data=False)
    opset = next(op.version for op in graph.opset_import if op.domain in ("", "ai.onnx"))

    def tensors(items: list[Any]) -> list[dict[str, Any]]:
        return [{"name": t.name, "shape": list(t.shape), "dtype": t.type} for t in items]

    return {
        "checkpoint": str(Path(cfg.ckpt_path).resolve()),
        "opset": int(opset),
        "inputs": tensors(runner.session.get_inputs()),
        "outputs": tensors(runner.session.get_outputs()),
        "input_description": runner.info.input_description,
        "data": runner.info.to_dict(),
        "normalisation": {"mean": model.mean.tolist(), "std": model.std.tolist()},
        "tolerance": float(cfg.tolerance),
        "rtol": tolerances(cfg)[1],
        "parity": rows,
        "threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
    }
