"""Training end to end: real Lightning runs on the real data, checked by their outputs."""

import csv
from pathlib import Path
from typing import Any

import pytest
import torch

from support import QUICK, compose_config, module, read_json, run_cli

train = module("train")
evaluate = module("eval")


def epoch_losses(run_dir: Path) -> list[float]:
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    return [float(r["train/loss"]) for r in rows if r.get("train/loss")]


def test_fast_dev_run_touches_every_stage(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["debug=fast_dev_run", "callbacks.progress_bar=null"])
    metrics = train.train(cfg)
    assert metrics["steps"] == 1
    assert metrics["best_checkpoint"] is None
    assert 0.0 <= metrics["test"]["test/acc"] <= 1.0


def test_training_learns(trained: dict[str, Any]) -> None:
    losses = epoch_losses(trained["run_dir"])
    assert len(losses) == 3
    assert losses[-1] < 0.5 * losses[0]
    assert trained["metrics"]["test"]["test/acc"] > 0.8  # chance is 0.1


def test_run_directory_holds_config_checkpoints_and_metrics(trained: dict[str, Any]) -> None:
    run_dir = trained["run_dir"]
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    metrics = read_json(run_dir / "metrics.json")
    assert set(metrics) >= {"test", "best_checkpoint", "epochs", "steps", "fit_seconds"}
    assert metrics["epochs"] == 3
    assert metrics["steps"] == 3 * 20  # 1258 train rows in batches of 64
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
    metrics = evaluate.evaluate(cfg)
    for name, value in trained["metrics"]["test"].items():
        assert metrics["test"][name] == pytest.approx(value, abs=1e-6)
    assert read_json(tmp_path / "metrics.json")["test"] == metrics["test"]


@pytest.mark.slow
def test_same_seed_gives_same_weights(tmp_path: Path) -> None:
    states = []
    for name in ("a", "b"):
        cfg = compose_config(tmp_path / name, [*QUICK, "trainer.max_epochs=1", "seed=0"])
        train.train(cfg)
        states.append(torch.load(tmp_path / name / "checkpoints" / "last.ckpt", weights_only=True))
    for key, tensor in states[0]["state_dict"].items():
        assert torch.equal(tensor, states[1]["state_dict"][key]), key


@pytest.mark.slow
def test_cli_trains_and_writes_metrics(tmp_path: Path) -> None:
    result = run_cli("train", *QUICK, "trainer.max_epochs=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    assert read_json(run_dir / "metrics.json")["epochs"] == 2
    assert (run_dir / "train.log").is_file()
    assert f"run directory:   {run_dir.resolve()}" in result.stdout


@pytest.mark.slow
def test_eval_of_missing_checkpoint_is_one_clear_line(tmp_path: Path) -> None:
    result = run_cli("eval", "ckpt_path=nowhere.ckpt", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: checkpoint 'nowhere.ckpt' does not exist" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert "hint:" not in result.stderr  # ckpt_path is a key, though its default is ???
    assert list(tmp_path.iterdir()) == []  # the refused run's directory is removed
