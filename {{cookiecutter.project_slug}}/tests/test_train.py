"""Training end to end on this project's data and net: real runs, checked by their outputs."""

import csv
from pathlib import Path
from typing import Any

import pytest
import torch
from platekit.testing import QUICK, compose_config, project_module, read_json, run_cli


def test_fast_dev_run_touches_every_stage(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["debug=fast_dev_run", "callbacks.progress_bar=null"])
    metrics = project_module("train").train(cfg)
    assert metrics["steps"] == 1
    assert metrics["best_checkpoint"] is None
    assert 0.0 <= metrics["test"]["test/acc"] <= 1.0


def test_training_learns(trained: dict[str, Any]) -> None:
    with (trained["run_dir"] / "csv" / "metrics.csv").open() as handle:
        losses = [float(r["train/loss"]) for r in csv.DictReader(handle) if r.get("train/loss")]
    assert len(losses) == 3
    assert losses[-1] < 0.5 * losses[0]
    assert trained["metrics"]["test"]["test/acc"] > 0.8  # chance is 0.1


def test_run_directory_holds_config_checkpoints_and_metrics(trained: dict[str, Any]) -> None:
    run_dir = trained["run_dir"]
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    metrics = read_json(run_dir / "metrics.json")
    assert set(metrics) >= {"test", "best_checkpoint", "epochs", "steps", "fit_seconds"}
    assert (metrics["epochs"], metrics["steps"]) == (3, 3 * 20)  # 1258 train rows, batches of 64
    assert Path(metrics["best_checkpoint"]).is_file()
    assert metrics["test"] == trained["metrics"]["test"]


def test_checkpoints_load_with_weights_only(trained: dict[str, Any]) -> None:
    for path in (trained["run_dir"] / "checkpoints").glob("*.ckpt"):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        assert checkpoint["hyper_parameters"]["net"]["_target_"].endswith("SmallCNN")
        assert checkpoint["state_dict"]


def test_eval_reproduces_test_metrics(trained: dict[str, Any], tmp_path: Path) -> None:
    best = trained["metrics"]["best_checkpoint"]
    cfg = compose_config(tmp_path, [f"ckpt_path={best}", "trainer.accelerator=cpu"], "eval")
    metrics = project_module("eval").evaluate(cfg)
    for name, value in trained["metrics"]["test"].items():
        assert metrics["test"][name] == pytest.approx(value, abs=1e-6)
    assert read_json(tmp_path / "metrics.json")["test"] == metrics["test"]


@pytest.mark.slow
def test_cli_trains_and_writes_metrics(tmp_path: Path) -> None:
    result = run_cli("train", *QUICK, "trainer.max_epochs=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    assert read_json(run_dir / "metrics.json")["epochs"] == 2
    assert (run_dir / "train.log").is_file()
    assert f"run directory:   {run_dir.resolve()}" in result.stdout
