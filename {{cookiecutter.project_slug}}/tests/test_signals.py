"""Real signals on a real training subprocess: SIGTERM saves and exits, SIGKILL loses little.

Both continue with ``ckpt_path=last`` in the same run directory and end bitwise equal to
an uninterrupted run.
"""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from support import (
    CONFIG_DIR,
    PACKAGE,
    QUICK,
    ROOT,
    compose_config,
    loss_logging,
    module,
    run_cli,
    step_losses,
)

EVERY = 5  # periodic checkpoint cadence, in steps
ARGS = [
    *QUICK,
    "callbacks.early_stopping=null",
    f"callbacks.model_checkpoint.last_every_n_steps={EVERY}",
]


def start_training(cwd: Path, losses: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "CONFIG_DIR": str(CONFIG_DIR),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.train", *ARGS, *loss_logging(losses)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_steps(losses: Path, steps: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if losses.is_file() and len(losses.read_text().splitlines()) >= steps:
            return
        assert process.poll() is None, process.communicate()[0][-2000:]
        time.sleep(0.005)
    pytest.fail(f"training did not reach step {steps}")


def signal_training(cwd: Path, signum: int, timeout: float) -> tuple[Path, int, str]:
    """Start training, send ``signum`` after step 27; its losses file, exit code and output."""
    losses = cwd / "losses"
    process = start_training(cwd, losses)
    wait_for_steps(losses, 27, process)
    process.send_signal(signum)
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


def resume_and_compare(cwd: Path, losses: Path, reference: Path) -> Path:
    result = run_cli("train", *ARGS, *loss_logging(losses), "ckpt_path=last", cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
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
def test_sigkill_loses_at_most_the_steps_since_the_last_checkpoint(
    reference: Path, tmp_path: Path
) -> None:
    losses, _, _ = signal_training(tmp_path, signal.SIGKILL, timeout=60)
    killed_at = len(losses.read_text().splitlines())
    path = the_run_dir(tmp_path) / "checkpoints" / "last.ckpt"
    checkpoint = module("checkpoints.io").load_checkpoint(path)
    assert killed_at - EVERY <= checkpoint["global_step"] <= killed_at

    resume_and_compare(tmp_path, losses, reference)


# Saves a 400 MB checkpoint: long enough to be killed mid-write. argv: package, path.
KILLED_WRITER = """
import importlib, sys, torch
io = importlib.import_module(sys.argv[1] + ".checkpoints.io").SafeCheckpointIO()
io.save_checkpoint(dict(state_dict=dict(w=torch.zeros(100_000_000))), sys.argv[2])
"""


@pytest.mark.slow
def test_kill_mid_write_leaves_the_previous_checkpoint_intact(tmp_path: Path) -> None:
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}}, path)
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, PACKAGE, str(path)], env=env)
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".tmp") and p.stat().st_size > 0 for p in tmp_path.iterdir()):
        assert process.poll() is None, "the writer ended before it was killed"
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.001)
    process.kill()
    process.wait()
    assert path.read_bytes() == before
    assert torch.equal(torch.load(path, weights_only=True)["state_dict"]["w"], torch.ones(3))
