"""The progress display: plain lines without a terminal, few of them, with loss and speed."""

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from support import compose_config, module, run_cli

ProgressDisplay = module("training._progress").ProgressDisplay
build_trainer = module("training._trainer").build_trainer
build_parts = module("training._trainer").build_parts

# 3 epochs of 5 train batches and 2 val batches.
LIMITED = [
    "debug=limit",
    "callbacks=none",
    "trainer.log_every_n_steps=5",
    "trainer.accelerator=cpu",
]
LINE = re.compile(r"epoch (\d)/2 .*loss \d+\.\d{4}.*val_acc \d\.\d{4} .*\d steps/s")


def fit_with(
    progress: ProgressDisplay,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    *overrides: str,
) -> list[str]:
    cfg = compose_config(tmp_path, [*LIMITED, *overrides])
    trainer = build_trainer(cfg, callbacks=[progress], enable_checkpointing=False)
    with caplog.at_level(logging.INFO):
        datamodule, model, _ = build_parts(cfg)
        trainer.fit(model, datamodule=datamodule)
    return [r.getMessage() for r in caplog.records if r.name.endswith("progress")]


def test_without_a_terminal_one_line_per_epoch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = fit_with(ProgressDisplay(live=False), tmp_path, caplog)
    assert [LINE.search(line).group(1) for line in lines] == ["0", "1", "2"], lines


def test_a_task_monitoring_its_loss_shows_val_loss_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    progress = ProgressDisplay(live=False)
    lines = fit_with(progress, tmp_path, caplog, "model.task.monitor=loss")
    assert len(lines) == 3, lines
    for line in lines:
        assert re.fullmatch(r"epoch \d/2  loss \S+  val_loss \S+  [\d,]+ steps/s", line), line


@pytest.mark.slow
def test_periodic_lines_within_an_epoch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    progress = ProgressDisplay(refresh_every=2, plain_interval_s=0, live=False)
    lines = fit_with(progress, tmp_path, caplog)
    # Steps 2 and 4 of each 5-step epoch, then the epoch line.
    within = [line for line in lines if " step " in line]
    assert len(within) == 6, lines
    assert re.search(r"epoch 0/2  step 2  loss \d+\.\d{4}  [\d,]+ steps/s", within[0])


def test_live_bar_runs_and_stops(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    progress = ProgressDisplay(live=True)
    assert fit_with(progress, tmp_path, caplog) == []  # the bar draws, nothing is logged
    assert progress._bar is None  # stopped at the end of training


@pytest.mark.slow
def test_live_bar_still_writes_every_epoch_line_to_the_log_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_file = tmp_path / "train.log"
    handler = logging.FileHandler(log_file)
    logging.getLogger().addHandler(handler)
    try:
        fit_with(ProgressDisplay(live=True), tmp_path, caplog)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    lines = log_file.read_text().splitlines()
    assert [LINE.search(line).group(1) for line in lines if LINE.search(line)] == ["0", "1", "2"]


@pytest.mark.slow
def test_eval_into_a_pipe_draws_no_bar(trained: dict[str, Any], tmp_path: Path) -> None:
    result = run_cli("eval", f"ckpt_path={trained['metrics']['best_checkpoint']}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert "━" not in output  # the project's display: plain lines when not a terminal
    scores = r"test/loss \d\.\d{4}  test/acc \d\.\d{4}  test/balanced_acc \d\.\d{4} on "
    assert re.search(scores, result.stdout)
