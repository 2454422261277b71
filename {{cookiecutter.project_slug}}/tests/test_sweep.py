"""Sweeps: an Optuna search runs offline, one run directory per trial, and reports the best."""

from pathlib import Path

import pytest
import yaml

from support import QUICK, read_json, run_cli

# One short epoch per trial: a few batches of each split.
TINY = [*QUICK, "debug=limit", "trainer.max_epochs=1"]


@pytest.mark.slow
def test_two_trial_optuna_sweep(tmp_path: Path) -> None:
    result = run_cli(
        "train", "-m", "hparams_search=optuna", "hydra.sweeper.n_trials=2",
        *TINY, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [sweep_dir] = (tmp_path / "outputs" / "train" / "multiruns").iterdir()
    trials = sorted(p for p in sweep_dir.iterdir() if p.is_dir())
    assert [p.name for p in trials] == ["0", "1"]
    scores = []
    for trial in trials:
        metrics = read_json(trial / "metrics.json")
        assert metrics["run_dir"] == str(trial.resolve())
        assert Path(metrics["best_checkpoint"]).is_relative_to(trial.resolve())
        scores.append(metrics["best"]["val/acc"])
    assert yaml.safe_load((trials[0] / "config.yaml").read_text())["optimized_metric"] == "monitor"

    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(max(scores))
    assert set(results["best_params"]) == {
        "optimizer.lr", "optimizer.weight_decay", "data.batch_size",
        "model.net.dropout",
    }  # fmt: skip
    assert f"Best value: {results['best_value']}" in result.stdout + result.stderr


@pytest.mark.slow
def test_grid_multirun_gives_each_combination_a_run(tmp_path: Path) -> None:
    result = run_cli("train", "-m", "model=cnn,mlp", *TINY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [sweep_dir] = (tmp_path / "outputs" / "train" / "multiruns").iterdir()
    nets = [
        yaml.safe_load((sweep_dir / job / "config.yaml").read_text())["model"]["net"]["_target_"]
        for job in ("0", "1")
    ]
    assert [net.rsplit(".", 1)[1] for net in nets] == ["SmallCNN", "MLP"]
