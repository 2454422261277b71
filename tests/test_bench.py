"""The baked project's benchmark runs end to end and writes every figure to bench.json."""

import json
import math
import re
from pathlib import Path

import pytest

from conftest import run_entry, tail

# Every figure bench.json holds, by section (values are not checked: they depend on the machine).
FIGURES = {
    "setup": {
        "device",
        "device_name",
        "threads",
        "torch",
        "lightning",
        "model",
        "batch_size",
        "precision",
        "steps",
        "warmup",
        "repeats",
        "max_pairs",
        "clock",
    },
    "loop": {
        "plain_steps_per_s",
        "lightning_steps_per_s",
        "ratio",
        "overhead_us_per_step",
        "target_over_bare",
        "bare_lightning_steps_per_s",
        "bare_ratio",
        "bare_ratio_interval",
        "over_bare_ratio",
        "over_bare_interval",
        "over_bare_verdict",
        "confidence",
        "pairs",
        "over_bare_us_per_step",
        "plain_runs",
        "lightning_runs",
        "bare_lightning_runs",
    },
    "data": {"batches_per_s", "model_steps_per_s", "data_share", "verdict", "helps"},
    "epoch_boundary": {
        "epochs",
        "steps_per_epoch",
        "step_ms",
        "boundary_ms",
        "extra_steps",
        "target_extra_steps",
    },
    "first_step": {
        "seconds",
        "parts",
        "import_lightning_seconds",
        "above_import_lightning_seconds",
        "target_above_s",
        "runs",
    },
    "memory": {"measure", "peak_mb"},
}
STAGES = {"imports", "config", "model_build", "data_setup", "first_step"}


@pytest.mark.slow
def test_bench_runs_and_reports_every_figure(default_project: Path, tmp_path: Path) -> None:
    result, run_dir = run_entry(
        default_project,
        "bench",
        tmp_path,
        "trainer.accelerator=cpu",
        "bench.steps=5",
        "bench.warmup=2",
        "bench.repeats=1",
        "bench.max_pairs=1",
        "bench.data_batches=5",
        "bench.startup_runs=1",
    )
    assert result.returncode == 0, tail(result)
    results = json.loads((run_dir / "bench.json").read_text())
    for section, names in FIGURES.items():
        assert set(results[section]) == names, section
    assert set(results["first_step"]["parts"]) == STAGES
    numbers = [
        *(
            results["loop"][name]
            for name in (
                "plain_steps_per_s",
                "lightning_steps_per_s",
                "ratio",
                "overhead_us_per_step",
                "bare_lightning_steps_per_s",
                "bare_ratio",
                "over_bare_ratio",
                "over_bare_us_per_step",
            )
        ),
        results["data"]["batches_per_s"],
        results["memory"]["peak_mb"],
        results["first_step"]["seconds"],
        results["first_step"]["import_lightning_seconds"],
        *results["first_step"]["parts"].values(),
    ]
    assert all(isinstance(n, float) and math.isfinite(n) for n in numbers), numbers
    assert results["data"]["verdict"] in {"data-bound", "compute-bound"}
    assert results["precision"] is None  # fp32 against mixed precision runs on CUDA only
    assert not list(run_dir.rglob("*.ckpt"))  # checkpoints are not part of the timed loop
    assert "above import lightning" in result.stdout  # the printed table
    # The target (against bare Lightning) has a verdict; the plain-loop ratio is information.
    # One round is too few pairs to bound the median: the verdict says it cannot tell.
    assert re.search(
        r"project / bare Lightning +\d\.\d{3} \(1 pair, too few for an interval .*"
        r"target >= 0\.97: inconclusive",
        result.stdout,
    )
    assert re.search(
        r"above import lightning +-?\d+\.\d\d s \(target <= 1\.5 s: (met|missed)\)", result.stdout
    )
    assert "precision: " not in result.stdout  # once, in the table's first line, not per fit
    assert "project / plain loop" in result.stdout and "(information:" in result.stdout
    assert f"bench.json: {run_dir.resolve() / 'bench.json'}" in result.stdout
