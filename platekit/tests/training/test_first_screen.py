"""What a person sees first: a short header, epoch lines with the epoch's own figures,
no third-party noise; the full config in the run's files only."""

import csv
import re
import time
from pathlib import Path

import pytest

from support import cli_env, foreign_warnings, module, read_json, run_cli, run_project_cli

FIELDS = module("training._header").FIELDS
EPOCH = re.compile(
    r"^epoch (\d+)/(\d+)  loss (\S+)  val_loss (\S+)  val_acc (\S+)  [\d,]+ steps/s$"
)
FIRST_SCREEN = 25  # lines


def epoch_lines(output: str) -> dict[int, tuple[str, str, str]]:
    found = (EPOCH.match(line) for line in output.splitlines())
    return {int(m.group(1)): (m.group(3), m.group(4), m.group(5)) for m in found if m}


def csv_epochs(run_dir: Path) -> dict[int, tuple[str, str, str]]:
    """Epoch -> (train/loss, val/loss, val/acc) of metrics.csv, as the progress shows them."""
    rows: dict[int, dict[str, str]] = {}
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["epoch"]:
                rows.setdefault(int(row["epoch"]), {}).update({k: v for k, v in row.items() if v})
    names = ("train/loss", "val/loss", "val/acc")
    return {
        epoch: tuple(f"{float(row[name]):.4f}" for name in names)
        for epoch, row in rows.items()
        if all(name in row for name in names)
    }


@pytest.mark.slow
def test_default_train_then_resume_first_screen(tmp_path: Path) -> None:
    launched = time.perf_counter()
    # Started cold, not forked warm: the wall time and imports of a whole process are checked.
    env = cli_env()
    result = run_project_cli("train", "trainer.max_epochs=3", "logger=csv", cwd=tmp_path, env=env)
    elapsed = time.perf_counter() - launched
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    lines = result.stdout.splitlines()
    # The header, field by field, then the first epoch within the first screen.
    assert [line.split("  ")[0].rstrip() for line in lines[: len(FIELDS)]] == list(FIELDS)
    first_epoch = next(i for i, line in enumerate(lines) if line.startswith("epoch 0/2"))
    assert first_epoch < FIRST_SCREEN, lines[:FIRST_SCREEN]
    assert foreign_warnings(output) == []
    for noise in ("GPU available", "TPU available", "💡", "LeafSpec", "Seed set", "├──"):
        assert noise not in output, noise

    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    shown = epoch_lines(result.stdout)
    assert sorted(shown) == [0, 1, 2]
    assert shown == csv_epochs(run_dir)  # the epoch's own figures, every epoch
    # The summary's wall time is the process's: start-up and imports are in it.
    metrics = read_json(run_dir / "metrics.json")
    assert 0.7 * elapsed <= metrics["wall_seconds"] <= elapsed
    assert metrics["imports_seconds"] > 0.3  # at least torch and Lightning were imported
    assert re.search(
        r"wall time +[\d.]+ s from process start: start-up [\d.]+ s "
        r"\(imports and config [\d.]+ s\), fit [\d.]+ s",
        result.stdout,
    ), result.stdout[-2000:]
    # One steps/s: the summary's is the epochs' together, so it lies among theirs.
    assert_speeds_agree(result.stdout, metrics)
    log = (run_dir / "train.log").read_text()
    assert "├── model" in log  # the full config, in the log file only
    assert [line.split("] ", 1)[1] for line in log.splitlines() if "] epoch " in line] == [
        line for line in lines if EPOCH.match(line)
    ]

    # Resumed for one more epoch: continues the same run, no warning either.
    resumed = run_cli("train", "trainer.max_epochs=4", "logger=csv", "ckpt_path=last", cwd=tmp_path)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output[-3000:]
    assert foreign_warnings(output) == []
    assert sorted(epoch_lines(resumed.stdout)) == [3]
    assert epoch_lines(resumed.stdout) == {3: csv_epochs(run_dir)[3]}


def assert_speeds_agree(output: str, metrics: dict) -> None:
    """The summary's steps/s lies between the slowest and fastest epoch line's (shown
    rounded), as it must if both time the same training seconds."""
    rates = [float(rate.replace(",", "")) for rate in EPOCH_RATE.findall(output)]
    assert rates, output[-2000:]
    assert min(rates) - 0.5 <= metrics["steps_per_second"] <= max(rates) + 0.5, (rates, metrics)


EPOCH_RATE = re.compile(r"^epoch \d+/\d+ .*  ([\d,]+) steps/s$", re.MULTILINE)


@pytest.mark.slow
def test_early_stopping_says_when_and_why(tmp_path: Path) -> None:
    # val/loss falls, so "max" sees no improvement after epoch 0: stops after epoch 1.
    stop_early = [
        "callbacks.early_stopping.monitor=val/loss",
        "callbacks.early_stopping.mode=max",
        "callbacks.early_stopping.patience=1",
    ]
    result = run_cli("train", "trainer.max_epochs=6", "logger=csv", *stop_early, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "early stopping: stopped after epoch 1/5; val/loss has not improved for 1 "
        "validations, since epoch 0" in result.stdout
    )
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    stop = read_json(run_dir / "metrics.json")["early_stop"]
    assert (stop["epoch"], stop["monitor"], stop["reason"]) == (1, "val/loss", "patience_exhausted")


def test_plots_mark_the_best_epoch_and_the_stop() -> None:
    plots = module("training._plots")
    history = [{"epoch": e, "val/acc": a} for e, a in enumerate([0.5, 0.9, 0.8, 0.7])]
    figure = plots.curve_figure(
        history, "Accuracy", "accuracy", ["val/acc"], plots.epoch_marks(1, 3)
    )
    _, labels = figure.axes[0].get_legend_handles_labels()
    assert labels == ["val/acc", "best (epoch 1)", "early stop (epoch 3)"]


@pytest.mark.slow
def test_overfit_preset_drives_the_training_loss_near_zero(tmp_path: Path) -> None:
    result = run_cli("train", "debug=overfit", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert foreign_warnings(result.stdout + result.stderr) == []
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    final = read_json(run_dir / "metrics.json")["final"]
    assert final["epoch"] == 99
    assert final["train/loss"] < 0.05  # what configs/debug/overfit.yaml promises


@pytest.mark.slow
def test_epochs_shorter_than_the_logging_interval_still_log_steps_without_a_warning(
    tmp_path: Path,
) -> None:
    # 1258 train rows in batches of 512: 3 steps an epoch, under log_every_n_steps=10.
    result = run_cli(
        "train", "data.batch_size=512", "trainer.max_epochs=4", "logger=csv",
        "callbacks.progress_bar=null", cwd=tmp_path,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "logging interval" not in output
    assert foreign_warnings(output) == []
    # Lightning counts the interval over the run: step 10 of 12 is logged all the same.
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        logged = [row for row in csv.DictReader(handle) if row.get("train/grad_norm")]
    assert [int(row["step"]) for row in logged] == [9]
