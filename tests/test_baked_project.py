"""The baked project works: its own test suite passes and a real training run converges."""

import json
import re
from pathlib import Path

import pytest

from conftest import HOSTILE_ANSWERS, bake, python_in, run_entry, tail


@pytest.mark.slow
def test_baked_test_suite_passes(default_project: Path) -> None:
    # Every baked test, the slow tier too (the data contract over each configs/data/*.yaml,
    # resume with workers, the CLI): about 4 minutes on two cores. The machinery's tests are
    # platekit's (test_platekit.py).
    result = python_in(
        default_project,
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
        timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, tail(result)
    assert " passed" in result.stdout


@pytest.mark.slow
def test_default_training_reaches_95_percent(default_project: Path, tmp_path: Path) -> None:
    result, run_dir = run_entry(default_project, "train", tmp_path, "callbacks.progress_bar=null")
    assert result.returncode == 0, tail(result)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"]["test/acc"] >= 0.95
    assert Path(metrics["best_checkpoint"]).is_file()
    assert f"metrics:         {run_dir.resolve() / 'metrics.json'}" in result.stdout
    # The user-facing outputs: a summary table in the log and the plots of the run.
    assert "run summary" in result.stdout
    test_row = rf"test/acc \(best checkpoint\)\s+│\s+{metrics['test']['test/acc']:.4f}"
    assert re.search(test_row, result.stdout), result.stdout[-3000:]
    assert metrics["steps_per_second"] > 0
    assert metrics["best"]["val/acc"] >= metrics["final"]["val/acc"]
    plots = {p.name: p.stat().st_size for p in (run_dir / "plots").iterdir()}
    assert set(plots) == {
        "loss.png",
        "accuracy.png",
        "learning_rate.png",
        "confusion_matrix.png",
        "per_class.png",
    }
    assert min(plots.values()) > 10_000


@pytest.mark.slow
def test_hostile_answers_bake_a_working_project(tmp_path: Path) -> None:
    project = bake(tmp_path, **HOSTILE_ANSWERS)
    lint = python_in(project, "-m", "ruff", "check", ".")
    assert lint.returncode == 0, tail(lint)
    result = python_in(
        project, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider"
    )
    assert result.returncode == 0, tail(result)
