"""The benchmarks: the team's make bench in a bake (each setting tried, advice it can act on),
and the developer benchmark of platekit's loop overhead (make bench in this repo), which writes
every figure to bench.json."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEMPLATE, run_entry, tail

sys.path.insert(0, str(TEMPLATE / "platekit"))
from benchmarks import report, stats

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
        "overrides",
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


TEAM_BENCH = {
    "setup": {"device", "threads", "model", "batch_size", "num_workers", "precision", "steps",
              "rounds"},
    "step": {"steps_per_s", "samples_per_s", "ms", "runs"},
    "data": {"batches_per_s", "steps_per_s", "workers", "data_share", "verdict"},
    "memory": {"measure", "peak_mb"},
}  # fmt: skip


@pytest.mark.slow
def test_a_bakes_bench_tries_settings_and_gives_advice_it_can_act_on(
    default_project: Path, tmp_path: Path
) -> None:
    result, run_dir = run_entry(
        default_project, "bench", tmp_path, "trainer.accelerator=cpu", "bench.steps=4",
        "bench.warmup=1", "bench.rounds=2", "bench.data_batches=3",
    )  # fmt: skip
    assert result.returncode == 0, tail(result)
    results = json.loads((run_dir / "bench.json").read_text())
    for section, names in TEAM_BENCH.items():
        assert set(results[section]) == names, section
    assert results["tried"], "the default config has settings to try"
    for entry in results["tried"]:
        line = rf"{re.escape(entry['override'])} +{entry['ratio']:.2f}x {entry['per']} \("
        assert re.search(line, result.stdout), entry
    advice = re.findall(
        r"^advice: (\S+=\S+): \d+\.\d\dx (?:steps|samples)/s", result.stdout, re.MULTILINE
    )
    assert advice == [entry["override"] for entry in results["advice"]]
    assert f"bench.json: {run_dir.resolve() / 'bench.json'}" in result.stdout


def run_dev_bench(out: Path, *args: str) -> subprocess.CompletedProcess:
    """The template repo's make bench, on platekit's fixture project."""
    script = TEMPLATE / "platekit" / "benchmarks" / "loop_overhead.py"
    return subprocess.run(
        [sys.executable, str(script), "--out", str(out), *args],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_the_developer_benchmark_reports_every_figure(tmp_path: Path) -> None:
    result = run_dev_bench(
        tmp_path, "--steps", "5", "--warmup", "2", "--repeats", "1", "--max-pairs", "1",
        "--boundary-epochs", "2", "--startup-runs", "1", "--command-runs", "0",
        "trainer.accelerator=cpu",
    )  # fmt: skip
    assert result.returncode == 0, tail(result)
    results = json.loads((tmp_path / "bench.json").read_text())
    for section, names in FIGURES.items():
        assert set(results[section]) == names, section
    assert results["setup"]["overrides"] == ["trainer.accelerator=cpu"]
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
        results["memory"]["peak_mb"],
        results["first_step"]["seconds"],
        results["first_step"]["import_lightning_seconds"],
        *results["first_step"]["parts"].values(),
    ]
    assert all(isinstance(n, float) and math.isfinite(n) for n in numbers), numbers
    assert results["commands"] is None  # --command-runs 0 skips that section
    boundary = results["epoch_boundary"]
    assert boundary["epochs"] == 2
    assert boundary["steps_per_epoch"] == 20  # digits: 1258 train rows in batches of 64
    assert not list(tmp_path.rglob("*.ckpt"))  # checkpoints are not part of the timed loop
    # The target (against bare Lightning) has a verdict; the plain-loop ratio is information.
    # One round is too few pairs to bound the median: the verdict says it cannot tell.
    assert re.search(
        r"project / bare Lightning +\d\.\d{3} \(1 pair, too few for an interval .*"
        r"target >= 0\.97: inconclusive",
        result.stdout + result.stderr,
    )
    output = result.stdout + result.stderr
    assert re.search(
        r"above import lightning +-?\d+\.\d\d s \(target <= 1\.5 s: (met|missed)\)", output
    )
    assert "project / plain loop" in output
    assert f"bench.json: {tmp_path / 'bench.json'}" in output


def test_a_bad_developer_benchmark_option_is_one_clear_error(tmp_path: Path) -> None:
    result = run_dev_bench(tmp_path, "--steps", "0")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("error: --steps must be >= 1")
    assert not (tmp_path / "bench.json").exists()


def test_bench_targets_have_verdicts_and_negative_overheads_are_explained() -> None:

    loop = {
        "over_bare_ratio": 0.991,
        "over_bare_interval": [0.975, 1.004],
        "over_bare_verdict": "met",
        "pairs": 9,
        "target_over_bare": 0.97,
    }
    assert report.target_verdict(loop) == (
        "0.991 (interval 0.975-1.004 over 9 pairs; target >= 0.97: met)"
    )
    straddles = {**loop, "over_bare_interval": [0.950, 1.010], "over_bare_verdict": "inconclusive"}
    assert report.target_verdict(straddles).endswith(
        "target >= 0.97: inconclusive: the interval holds the target; run on a quieter "
        "machine or raise --max-pairs)"
    )
    # Too few pairs for an interval: the verdict does not speak of one.
    few = {**loop, "over_bare_interval": None, "over_bare_verdict": "inconclusive", "pairs": 4}
    assert report.target_verdict(few) == (
        "0.991 (4 pairs, too few for an interval (6 or more give one); target >= 0.97: "
        "inconclusive: no interval to judge by; raise --max-pairs to 6 or more)"
    )
    assert report.overhead(23.4, "over bare Lightning") == "23 us/step over bare Lightning"
    negative = report.overhead(-1453.0, "over the plain loop")
    assert negative.startswith("not measurable (-1453 us/step over the plain loop: the machine")


def test_median_interval_bounds_the_median_from_six_pairs_on() -> None:

    assert stats.median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)
    assert stats.median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)
    # n=9: P(Binomial(9, 1/2) < 2) = 10/512, twice that under 5 %: the 2nd and 8th values.
    assert stats.median_interval([float(v) for v in range(1, 10)]) == (2.0, 8.0)
    # n=20: the 6th and 15th (2 * P(X < 6) = 4.1 %; 2 * P(X < 7) = 11.5 %).
    assert stats.median_interval([float(v) for v in range(1, 21)]) == (6.0, 15.0)


def test_paired_ratio_says_met_missed_or_inconclusive() -> None:
    ratio = stats.PairedRatio.of
    assert ratio([0.98, 0.99, 1.0, 1.01, 0.985, 0.995], 0.97).verdict == "met"
    assert ratio([0.90, 0.91, 0.92, 0.93, 0.94, 0.95], 0.97).verdict == "missed"
    assert ratio([0.89, 0.95, 0.97, 0.99, 1.02, 1.07], 0.97).verdict == "inconclusive"
    few = ratio([1.05, 1.06, 1.07], 0.97)  # all above, but 3 pairs bound no median
    assert few.verdict == "inconclusive"
    assert few.interval() == "no interval from 3 pairs (6 or more give one)"


def test_a_plain_loop_slower_than_bare_lightning_is_explained() -> None:

    assert report.plain_loop_note({"bare_ratio": 0.87, "bare_ratio_interval": [0.85, 0.9]}) == []
    noisy = report.plain_loop_note({"bare_ratio": 1.04, "bare_ratio_interval": [0.96, 1.1]})
    assert "within the noise of this machine" in noisy[0]
    real = report.plain_loop_note({"bare_ratio": 1.2, "bare_ratio_interval": [1.1, 1.3]})
    assert "beyond noise: the plain loop is not the fastest loop on this setup" in real[0]


def test_time_to_first_step_has_a_verdict() -> None:

    startup = {
        "parts": {"imports": 2.0},
        "seconds": 4.26,
        "import_lightning_seconds": 1.5,
        "above_import_lightning_seconds": 2.76,
        "target_above_s": 1.5,
    }
    rows = report.startup_rows(startup)
    assert " ".join(rows[-1].split()) == "above import lightning 2.76 s (target <= 1.5 s: missed)"
    met = report.startup_rows({**startup, "above_import_lightning_seconds": 1.2})
    assert met[-1].endswith("(target <= 1.5 s: met)")
