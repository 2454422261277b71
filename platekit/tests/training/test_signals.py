"""Real signals on a real training subprocess: SIGTERM and Ctrl-C save and exit (0 and 130),
repeated signals change nothing but a second Ctrl-C's immediate stop, SIGKILL loses little.

Each continues with ``ckpt_path=last`` in the same run directory and ends bitwise equal to
an uninterrupted run.
"""

import contextlib
import csv
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import torch

from support import (
    QUICK,
    ROOT,
    cli_env,
    compose_config,
    foreign_warnings,
    loss_logging,
    module,
    run_cli,
    sigterm_at_batch,
    start_cli,
    step_losses,
)

EVERY = 5  # periodic checkpoint cadence, in steps
ARGS = [
    *QUICK,
    "callbacks.early_stopping=null",
    f"callbacks.model_checkpoint.last_every_n_steps={EVERY}",
]


def start_training(cwd: Path, losses: Path, *extra: str, **popen: Any) -> subprocess.Popen:
    """Start training in ``cwd``; stdout and stderr together, unless ``popen`` says otherwise."""
    options = {"stderr": subprocess.STDOUT, **popen}
    return start_cli("train", *ARGS, *loss_logging(losses), *extra, cwd=cwd, **options)


def wait_for_steps(losses: Path, steps: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if losses.is_file() and len(losses.read_text().splitlines()) >= steps:
            return
        assert process.poll() is None, process.communicate()[0][-2000:]
        time.sleep(0.005)
    pytest.fail(f"training did not reach step {steps}")


def signal_training(
    cwd: Path, signum: int, timeout: float, *extra: str, again_after: float | None = None
) -> tuple[Path, int, str]:
    """Start training, send ``signum`` after step 27 (and again ``again_after`` seconds
    later); its losses file, exit code and output.

    SIGINT goes to the whole process group, DataLoader workers included, as a terminal's
    Ctrl-C does; the run gets a session of its own so the tests' group is spared.
    """
    losses = cwd / "losses"
    process = start_training(cwd, losses, *extra, start_new_session=True)
    wait_for_steps(losses, 27, process)
    send = os.killpg if signum == signal.SIGINT else os.kill
    send(process.pid, signum)
    if again_after is not None:
        time.sleep(again_after)
        with contextlib.suppress(ProcessLookupError):  # it may have exited already
            send(process.pid, signum)
    output, _ = process.communicate(timeout=timeout)
    return losses, process.returncode, output


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference")
    module("train").train(compose_config(run_dir, [*ARGS, *loss_logging(run_dir / "losses")]))
    return run_dir


def the_run_dir(cwd: Path) -> Path:
    [run_dir] = (cwd / "outputs" / "train" / "runs").iterdir()
    return run_dir


def resume_and_compare(cwd: Path, losses: Path, reference: Path, *extra: str) -> Path:
    result = run_cli("train", *ARGS, *loss_logging(losses), *extra, "ckpt_path=last", cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    # A mid-epoch resume: Lightning's "dataloader is not resumable" and "checkpoint
    # directory is not empty" warnings do not apply, and do not show.
    assert foreign_warnings(result.stdout + result.stderr) == []
    output = result.stdout + result.stderr
    # Lightning's "Restoring states from ...", "Restored all states from ..." and "Loaded
    # model weights from ...", said once in the run's own words (the resumed checkpoint; the
    # tested one is in the summary)
    assert "Restoring states" not in output
    assert "Restored all states" not in output
    assert "Loaded model weights" not in output
    resumed = [line for line in output.splitlines() if line.startswith("resumes ")]
    assert len(resumed) == 1, output[-3000:]
    assert re.fullmatch(r"resumes \S+last\.ckpt \(epoch \d+, step \d+\)", resumed[0]), resumed
    run_dir = the_run_dir(cwd)  # the resumed run wrote into the same directory
    expected = torch.load(reference / "checkpoints" / "last.ckpt", weights_only=True)
    actual = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    for key, tensor in expected["state_dict"].items():
        assert torch.equal(actual["state_dict"][key], tensor), key
    assert step_losses(losses) == step_losses(reference / "losses")
    assert len(step_losses(losses)) == 60
    return run_dir


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_exits_cleanly_and_resumes_exactly(
    reference: Path, tmp_path: Path
) -> None:
    losses, returncode, output = signal_training(tmp_path, signal.SIGTERM, timeout=120)
    assert returncode == 0, output[-2000:]
    run_dir = the_run_dir(tmp_path)
    stopped_at = len(losses.read_text().splitlines())
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == stopped_at  # nothing lost
    assert "stopped by SIGTERM" in output
    assert "weights_only" not in output
    assert foreign_warnings(output) == []
    assert not (run_dir / "metrics.json").exists()

    resume_and_compare(tmp_path, losses, reference)
    log = (run_dir / "train.log").read_text()
    assert log.index("stopped by SIGTERM") < log.index("run directory:")  # one log, continued
    assert (run_dir / "metrics.json").is_file()
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    epochs_validated = [int(r["epoch"]) for r in rows if r.get("val/acc")]
    assert epochs_validated == [0, 1, 2]  # epoch 0 from before the signal, kept
    assert any(r.get("test/acc") for r in rows)


@pytest.mark.slow
def test_a_stop_under_gradient_accumulation_waits_for_the_optimizer_step(tmp_path: Path) -> None:
    """With three batches to a step, SIGTERM after batch 27 (in epoch 1, 20 batches to an
    epoch: its 7th, in the step of batches 7-9) stops after batch 29, at step 10: a save
    between steps would drop the gradients summed so far, and the resume would differ."""
    accumulate = ["trainer.accumulate_grad_batches=3", "callbacks.early_stopping=null", *QUICK]
    reference = tmp_path / "reference"
    train = module("train").train
    train(compose_config(reference, [*accumulate, *loss_logging(reference / "losses")]))
    runs = tmp_path / "runs"
    runs.mkdir()
    signalled = [*accumulate, *loss_logging(runs / "losses"), *sigterm_at_batch(27, runs / "sent")]
    stopped = run_cli("train", *signalled, cwd=runs)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output[-3000:]
    assert "stopped by SIGTERM after step 10" in output, output[-3000:]
    last = the_run_dir(runs) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 10

    resumed = run_cli("train", *signalled, "ckpt_path=last", cwd=runs)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    expected = torch.load(reference / "checkpoints" / "last.ckpt", weights_only=True)
    actual = torch.load(last, weights_only=True)
    assert actual["global_step"] == expected["global_step"] == 21  # 7 steps an epoch
    for key, tensor in expected["state_dict"].items():
        assert torch.equal(actual["state_dict"][key], tensor), key
    assert step_losses(runs / "losses") == step_losses(reference / "losses")


# 20 training batches an epoch, 17 validation batches of 16 rows
VALIDATED = ["callbacks.early_stopping=null", *QUICK, "data.eval_batch_size=16"]


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("validated")
    module("train").train(compose_config(run_dir, VALIDATED))
    return run_dir


@pytest.mark.slow
@pytest.mark.parametrize(
    ("batch", "validation", "step"),
    [(20, False, 20), (5, True, 20), (37, True, 60)],
    ids=["epoch-end-step", "validating", "last-validation"],
)
def test_a_stop_in_a_validation_runs_it_again_in_full_on_the_resume(
    validated: Path, tmp_path: Path, batch: int, validation: bool, step: int
) -> None:
    """SIGTERM after an epoch's last step (Lightning then cuts its validation short), or
    during a validation (the last epoch's too): the run stops after the current validation
    batch, and the resume validates that epoch again from its first batch, so every epoch
    has its validation row, best checkpoint and early-stopping check (the resume skipped
    it before)."""
    signalled = [*VALIDATED, *sigterm_at_batch(batch, tmp_path / "sent", validation)]
    stopped = run_cli("train", *signalled, cwd=tmp_path)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output[-3000:]
    assert f"stopped by SIGTERM after step {step};" in output, output[-3000:]
    run_dir = the_run_dir(tmp_path)
    assert not (run_dir / "metrics.json").exists()  # not tested: the last epoch is unfinished

    resumed = run_cli("train", *signalled, "ckpt_path=last", cwd=tmp_path)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output[-3000:]
    assert foreign_warnings(output) == []  # no "could not find the monitored key val/acc"
    rows = (run_dir / "csv" / "metrics.csv").read_text()
    assert rows == (validated / "csv" / "metrics.csv").read_text()
    expected, actual = (json.loads((d / "metrics.json").read_text()) for d in (validated, run_dir))
    for key in ("test", "best", "final", "per_class", "epochs", "steps"):
        assert actual[key] == expected[key], key
    assert Path(actual["best_checkpoint"]).name == Path(expected["best_checkpoint"]).name


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT], ids=["SIGHUP", "SIGQUIT"])
def test_sighup_and_sigquit_save_and_exit_as_sigterm_does(
    reference: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    losses, returncode, output = signal_training(tmp_path, signum, timeout=120)
    assert returncode == 0, output[-2000:]
    stopped_at = len(losses.read_text().splitlines())
    last = the_run_dir(tmp_path) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == stopped_at
    assert f"stopped by {signum.name} after step {stopped_at}; saved {last}" in output
    assert "Traceback" not in output
    if signum == signal.SIGHUP:
        resume_and_compare(tmp_path, losses, reference)


@pytest.mark.slow
def test_closing_the_terminal_saves_the_run(tmp_path: Path) -> None:
    """The terminal of a foreground run goes away (its master side closed): the kernel sends
    SIGHUP and every later write to the terminal fails; the run still saves and exits 0."""
    losses = tmp_path / "losses"
    master, slave = pty.openpty()
    process = start_cli(
        "train",
        *ARGS,
        *loss_logging(losses),
        cwd=tmp_path,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    deadline = time.monotonic() + 120
    while not (losses.is_file() and len(losses.read_text().splitlines()) >= 27):
        assert time.monotonic() < deadline
        assert process.poll() is None
        if select.select([master], [], [], 0.01)[0]:
            os.read(master, 65536)
    os.close(master)  # the terminal closes: SIGHUP to its foreground group
    assert process.wait(timeout=120) == 0
    run_dir = the_run_dir(tmp_path)
    stopped_at = len(losses.read_text().splitlines())
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] >= 27
    log = (run_dir / "train.log").read_text()
    assert f"stopped by SIGHUP after step {stopped_at}" in log, log[-2000:]


@pytest.mark.slow
def test_sigkill_loses_at_most_the_steps_since_the_last_checkpoint(
    reference: Path, tmp_path: Path
) -> None:
    losses, _, _ = signal_training(tmp_path, signal.SIGKILL, timeout=60)
    killed_at = len(losses.read_text().splitlines())
    path = the_run_dir(tmp_path) / "checkpoints" / "last.ckpt"
    checkpoint = module("checkpoints._io").load_checkpoint(path)
    assert killed_at - EVERY <= checkpoint["global_step"] <= killed_at

    resume_and_compare(tmp_path, losses, reference)


# Saves a 400 MB checkpoint: long enough to be killed mid-write. argv: package, path.
KILLED_WRITER = """
import importlib, sys, torch
io = importlib.import_module(sys.argv[1] + ".checkpoints._io").SafeCheckpointIO()
io.save_checkpoint(dict(state_dict=dict(w=torch.zeros(100_000_000))), sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5, 1.0])
def test_a_second_sigterm_changes_nothing(tmp_path: Path, delay: float) -> None:
    losses, returncode, output = signal_training(
        tmp_path, signal.SIGTERM, timeout=120, again_after=delay
    )
    assert returncode == 0, output[-2000:]
    stopped_at = len(losses.read_text().splitlines())
    checkpoint = torch.load(the_run_dir(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == stopped_at
    assert "stopped by SIGTERM" in output


@pytest.mark.slow
def test_ctrl_c_saves_last_ckpt_exits_130_and_resumes_exactly(
    reference: Path, tmp_path: Path
) -> None:
    workers = "data.num_workers=2"  # they get the terminal's Ctrl-C too, and must ignore it
    losses, returncode, output = signal_training(tmp_path, signal.SIGINT, 120, workers)
    assert returncode == 130, output[-3000:]
    run_dir = the_run_dir(tmp_path)
    stopped_at = len(losses.read_text().splitlines())
    last = run_dir / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == stopped_at  # not behind
    assert f"stopped by SIGINT after step {stopped_at}; saved {last}" in output
    assert "ckpt_path=last" in output
    assert "Traceback" not in output
    assert "KeyboardInterrupt" not in output
    assert not (run_dir / "metrics.json").exists()

    resume_and_compare(tmp_path, losses, reference, workers)
    assert (run_dir / "metrics.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.3])
def test_a_second_ctrl_c_stops_at_once_leaving_whole_files(
    reference: Path, tmp_path: Path, delay: float
) -> None:
    losses, returncode, output = signal_training(
        tmp_path, signal.SIGINT, 60, "data.num_workers=2", again_after=delay
    )
    assert returncode == 130, output[-3000:]
    assert "Traceback" not in output
    stopped_at = len(losses.read_text().splitlines())
    run_dir = the_run_dir(tmp_path)
    checkpoint = module("checkpoints._io").load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    assert stopped_at - EVERY <= checkpoint["global_step"] <= stopped_at

    resume_and_compare(tmp_path, losses, reference)
    assert not list(run_dir.rglob("*.tmp"))  # any left by the stop were removed at the start


def terminal_screen(raw: bytes, width: int) -> list[str]:
    """The lines a terminal ``width`` columns wide shows after ``raw``.

    Enough of a VT100 for rich's live display: carriage return, line feed, erase line,
    cursor up, and wrapping once a character is written past the last column. Colours and
    other escapes are dropped.
    """
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in re.finditer(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b.|.", raw.decode(), re.DOTALL):
        args, command, char = token.group(1), token.group(2), token.group(0)
        if command == "A":
            row = max(row - int(args or 1), 0)
        elif command == "K":
            rows[row] = [] if args == "2" else rows[row][:col]
        elif char == "\r":
            col = 0
        elif char == "\n":
            row += 1
        elif not char.startswith("\x1b"):
            if col >= width:
                row, col = row + 1, 0
            rows.extend([] for _ in range(row + 1 - len(rows)))
            line = rows[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = char
            col += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        rows.extend([] for _ in range(row + 1 - len(rows)))
    return ["".join(line).rstrip() for line in rows]


def press_ctrl_c_in_a_terminal(cwd: Path, width: int) -> tuple[int, list[str]]:
    """Train in a pseudo-terminal with the live progress bar, press Ctrl-C after step 27;
    the exit code and what the terminal shows."""
    losses = cwd / "losses"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, width, 0, 0))
    args = [a for a in ARGS if not a.startswith("callbacks.progress_bar")]  # the default bar
    process = start_cli(
        "train",
        *[a for a in args if a != "callbacks.progress_bar=null"],
        *loss_logging(losses),
        "data.num_workers=2",
        cwd=cwd,
        env=cli_env(COLUMNS=str(width), TERM="xterm-256color"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,  # then the terminal becomes its controlling terminal
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    raw, pressed, deadline = b"", False, time.monotonic() + 180
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.01)[0]:
            try:
                raw += os.read(master, 65536)
            except OSError:  # every process holding the terminal has exited
                break
        elif process.poll() is not None and pressed:
            break
        if not pressed and losses.is_file() and len(losses.read_text().splitlines()) >= 27:
            os.write(master, b"\x03")  # the terminal sends SIGINT to its foreground group
            pressed = True
    os.close(master)
    return process.wait(timeout=60), terminal_screen(raw, width)


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_shows_each_epoch_once(tmp_path: Path) -> None:
    returncode, screen = press_ctrl_c_in_a_terminal(tmp_path, width=100)
    text = "\n".join(screen)
    assert returncode == 130, text[-3000:]
    for epoch in ("epoch 0/2", "epoch 1/2"):
        assert sum(line.startswith(epoch) for line in screen) == 1, text[-3000:]
    assert "stopped by SIGINT after step" in text
    assert "Traceback" not in text


@pytest.mark.slow
def test_kill_mid_write_leaves_the_previous_checkpoint_intact(tmp_path: Path) -> None:
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}}, path)
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, "platekit", str(path)], env=env
    )
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".tmp") and p.stat().st_size > 0 for p in tmp_path.iterdir()):
        assert process.poll() is None, "the writer ended before it was killed"
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.001)
    process.kill()
    process.wait()
    assert path.read_bytes() == before
    assert torch.equal(torch.load(path, weights_only=True)["state_dict"]["w"], torch.ones(3))

    # The next run in the directory removes the dead writer's temporary, not a live one's.
    [stale] = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert stale.name.startswith(f".last.ckpt.{process.pid}@")
    live = tmp_path / f".other.ckpt.{module('_files').writer_tag()}.abcdefgh.tmp"
    live.write_bytes(b"being written")
    result = run_cli("train", "debug=fast_dev_run", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert not stale.exists()
    assert live.exists()
    assert path.read_bytes() == before
