"""Every figure a run reports about its test split is the shipped model's, from one pass.

A run that trains in ``bf16-mixed`` tests in float32 without autocast, as ``model.onnx`` and
predict compute: ``test/acc``, the per-class table and the confusion counts of one run equal
those of predict's answers on the same rows; regression figures agree within 1e-6. eval runs
in float32 too, unless ``trainer.precision`` is given (and then says so).
"""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from platekit.checkpoints._restore import Checkpoint
from platekit.models._class_counts import per_class
from platekit.testing import predict_rows

from support import read_json, run_cli

QUICK_CLI = ["trainer.max_epochs=3", "callbacks.progress_bar=null", "logger=csv"]


def train_cli(cwd: Path, *overrides: str) -> dict[str, Any]:
    """Train through the command line from ``cwd``; return its metrics.json."""
    result = run_cli("train", *QUICK_CLI, *overrides, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    [path] = (cwd / "outputs" / "train" / "runs").glob("*/metrics.json")
    return {**read_json(path), "stdout": result.stdout}


def split_of(checkpoint: str, directory: Path) -> tuple[Path, np.ndarray]:
    """The checkpoint's own test split as raw inputs (what a user feeds predict), and targets."""
    datamodule = Checkpoint.open(checkpoint).datamodule({})  # its own rows, checked
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "test.npy"
    np.save(path, datamodule.raw_inputs("test").numpy())
    return path, datamodule.targets("test").numpy()


def predicted_classes(out_dir: Path, model: Any, inputs: Path) -> np.ndarray:
    return np.array([row["class"] for row in predict_rows(out_dir, model, inputs)])


def assert_classification_is_predicts(metrics: dict[str, Any], tmp_path: Path) -> np.ndarray:
    """metrics.json's test/acc, balanced_acc and per-class table are predict's, exactly."""
    inputs, targets = split_of(metrics["best_checkpoint"], tmp_path / "split")
    classes = predicted_classes(tmp_path / "predict", metrics["best_checkpoint"], inputs)
    assert sum(row["support"] for row in metrics["per_class"].values()) == len(targets)
    names = list(metrics["per_class"])
    confusion = np.zeros((len(names), len(names)), dtype=np.int64)
    np.add.at(confusion, (targets, classes), 1)
    assert metrics["per_class"] == per_class(torch.from_numpy(confusion), names)
    assert metrics["test"]["test/acc"] == float((classes == targets).mean())
    support = confusion.sum(axis=1)
    recalls = np.diagonal(confusion)[support > 0] / support[support > 0]
    assert metrics["test"]["test/balanced_acc"] == pytest.approx(float(recalls.mean()), abs=1e-12)
    return classes


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param(["trainer.precision=bf16-mixed"], id="bf16-mixed"),
        pytest.param([], id="auto"),
        pytest.param(
            ["trainer=ddp_cpu", "trainer.precision=bf16-mixed"],
            id="ddp_cpu",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_classification_figures_are_predicts_on_the_same_rows(
    tmp_path: Path, overrides: list[str]
) -> None:
    metrics = train_cli(tmp_path, *overrides)
    trained_at = "bf16-mixed" if overrides else "32-true"  # auto is 32-true on any CPU
    assert (metrics["precision"], metrics["test_precision"]) == (trained_at, "32-true")
    assert metrics["world_size"] == (2 if "trainer=ddp_cpu" in overrides else 1)
    assert_classification_is_predicts(metrics, tmp_path)


@pytest.mark.slow
def test_bf16_run_eval_and_onnx_agree_with_its_figures(tmp_path: Path) -> None:
    """eval of the checkpoint gives the run's figures (float32, said); asked for bf16-mixed it
    says so; the exported fp32 model.onnx predicts the same class on (almost) every row."""
    metrics = train_cli(tmp_path, "trainer.precision=bf16-mixed")
    classes = assert_classification_is_predicts(metrics, tmp_path)
    checkpoint = metrics["best_checkpoint"]

    result = run_cli("eval", f"ckpt_path={checkpoint}", "callbacks.progress_bar=null", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [path] = (tmp_path / "outputs" / "eval" / "runs").glob("*/metrics.json")
    evaluated = read_json(path)
    assert evaluated["precision"] == "32-true"
    assert evaluated["test"]["test/acc"] == metrics["test"]["test/acc"]
    assert evaluated["per_class"] == metrics["per_class"]
    assert "(float32, as model.onnx and predict compute)" in result.stdout + result.stderr

    (tmp_path / "bf16").mkdir()
    (tmp_path / "export").mkdir()
    asked = run_cli(
        "eval", f"ckpt_path={checkpoint}", "trainer.precision=bf16-mixed",
        "callbacks.progress_bar=null", cwd=tmp_path / "bf16",
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr[-3000:]
    [path] = (tmp_path / "bf16" / "outputs" / "eval" / "runs").glob("*/metrics.json")
    assert read_json(path)["precision"] == "bf16-mixed"
    assert "bf16-mixed as asked; model.onnx and predict compute in float32" in (
        asked.stdout + asked.stderr
    )

    exported = run_cli("export", f"ckpt_path={checkpoint}", cwd=tmp_path / "export")
    assert exported.returncode == 0, exported.stderr[-3000:]
    [onnx] = (tmp_path / "export" / "outputs" / "export" / "runs").glob("*/model.onnx")
    inputs = tmp_path / "split" / "test.npy"
    onnx_classes = predicted_classes(tmp_path / "onnx", onnx, inputs)
    assert (onnx_classes != classes).sum() <= 1  # export's parity tolerance allows a near-tie


def test_regression_figures_are_predicts_on_the_same_rows(tmp_path: Path) -> None:
    metrics = train_cli(tmp_path, "data=diabetes", "trainer.precision=bf16-mixed")
    inputs, targets = split_of(metrics["best_checkpoint"], tmp_path / "split")
    rows = predict_rows(tmp_path / "predict", metrics["best_checkpoint"], inputs)
    values = np.array([row["value"] for row in rows], dtype=np.float64)
    error = values - targets.astype(np.float64)
    expected = {
        "test/mae": np.abs(error).mean(),
        "test/rmse": np.sqrt(np.square(error).mean()),
        "test/r2": 1 - np.square(error).sum() / np.square(targets - targets.mean()).sum(),
    }
    for name, value in expected.items():
        assert metrics["test"][name] == pytest.approx(float(value), rel=1e-6), name


def test_a_headline_that_hides_a_class_is_said_and_a_failing_plot_costs_nothing(
    tmp_path: Path,
) -> None:
    """Noise features, 1 row in 20 of a rare class: the model answers the common class for
    every row; accuracy is high and says nothing of it. The rare class's name is broken
    mathtext: the plots draw it as plain text (they failed on it before)."""
    rng = np.random.default_rng(0)
    rows = ["a,b,c,label"]
    for index in range(600):
        label = "$x_{1$" if index % 20 == 0 else "common"
        rows.append(",".join(f"{value:.4f}" for value in rng.normal(size=3)) + f",{label}")
    table = tmp_path / "rare.csv"
    table.write_text("\n".join(rows) + "\n")
    metrics = train_cli(tmp_path, "data=csv", f"data.path={table}", "data.target=label")
    [caveat] = metrics["caveats"]
    assert caveat.startswith("test/acc 0.9")
    assert "no test row of '$x_{1$'" in caveat
    assert caveat.endswith(
        "train with model.task.class_weights=balanced and model.task.monitor=balanced_acc"
    )
    assert caveat in metrics["stdout"]
    assert metrics["per_class"]["$x_{1$"]["recall"] == 0.0
    assert "plots not written" not in metrics["stdout"]
