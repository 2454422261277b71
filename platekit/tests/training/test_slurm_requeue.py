"""SLURM near its time limit: save, requeue, and resume the same run exactly.

``scripts/slurm.sbatch`` runs for real with a fake ``srun`` (runs the task) and a fake
``scontrol`` (records what it is asked) on PATH, under the variables srun sets for a
one-task job.
"""

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
    QUICK,
    ROOT,
    compose_config,
    loss_logging,
    module,
    python_path,
    step_losses,
)

JOB = "4242"
ARGS = [
    "trainer=default",
    *QUICK,
    "callbacks.early_stopping=null",
]
FAKE_SRUN = '#!/usr/bin/env bash\nexec "$@"\n'
FAKE_SCONTROL = """#!/usr/bin/env bash
if [[ $1 == show ]]; then echo localhost; else echo "$*" >> "$SCONTROL_LOG"; fi
"""
SLURM = {
    "SLURM_JOB_ID": JOB,
    "SLURM_JOB_NAME": "train",  # not bash/interactive: a batch job
    "SLURM_JOB_NODELIST": "localhost",
    "SLURM_NTASKS": "1",
    "SLURM_NNODES": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_CPUS_PER_TASK": "1",
}


def fake_slurm(tmp_path: Path) -> dict[str, str]:
    """The environment of a task of job 4242, with fake srun/scontrol first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RUN_NAME"))}
    return {
        **inherited,
        **SLURM,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": python_path(),
        "CONFIG_DIR": str(CONFIG_DIR),
        "PYTHON": sys.executable,
        "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
    }


def sbatch(tmp_path: Path, losses: Path, **env: str) -> subprocess.Popen:
    script = ROOT / "scripts" / "slurm.sbatch"
    return subprocess.Popen(
        ["bash", str(script), *ARGS, *loss_logging(losses)],
        cwd=tmp_path,
        env={**fake_slurm(tmp_path), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_job_script_asks_for_a_signal_before_the_limit_and_may_be_requeued() -> None:
    text = (ROOT / "scripts" / "slurm.sbatch").read_text()
    assert "#SBATCH --signal=USR1@120\n" in text
    assert "#SBATCH --requeue\n" in text
    assert module("training._slurm").REQUEUE_SIGNAL == signal.SIGUSR1


def test_under_slurm_lightnings_own_auto_requeue_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    slurm = module("training._slurm")
    for name in [n for n in os.environ if n.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    assert slurm.cluster_plugins() == []
    for name, value in SLURM.items():
        monkeypatch.setenv(name, value)
    [environment] = slurm.cluster_plugins()
    assert environment.auto_requeue is False
    assert slurm.job_id() == JOB
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert slurm.job_id() == "77_3"


def test_without_the_requeue_signal_nothing_is_requeued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in fake_slurm(tmp_path).items():
        monkeypatch.setenv(name, value)
    slurm = module("training._slurm")
    slurm.arm_requeue()
    signal.signal(slurm.REQUEUE_SIGNAL, signal.SIG_DFL)
    assert slurm.requeue_if_asked() is False  # a SIGTERM (scancel) alone: no requeue
    assert not (tmp_path / "scontrol.log").exists()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference")
    module("train").train(compose_config(run_dir, [*ARGS, *loss_logging(run_dir / "losses")]))
    return run_dir


@pytest.mark.slow
def test_time_limit_signal_saves_requeues_and_the_next_start_resumes_exactly(
    reference: Path, tmp_path: Path
) -> None:
    losses = tmp_path / "losses"
    job = sbatch(tmp_path, losses)
    deadline = time.monotonic() + 120
    while not (losses.is_file() and len(losses.read_text().splitlines()) >= 27):
        assert job.poll() is None, job.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "training did not reach step 27"
        time.sleep(0.005)
    job.send_signal(signal.SIGUSR1)  # what --signal=USR1@120 sends the task
    output, _ = job.communicate(timeout=120)
    assert job.returncode == 0, output[-3000:]
    assert (tmp_path / "scontrol.log").read_text() == f"requeue {JOB}\n"
    run_dir = tmp_path / "outputs" / "train" / "runs" / f"slurm-{JOB}"
    last = run_dir / "checkpoints" / "last.ckpt"
    stopped_at = len(losses.read_text().splitlines())
    assert torch.load(last, weights_only=True)["global_step"] == stopped_at
    assert not list(run_dir.rglob("hpc_ckpt_*.ckpt"))  # Lightning's mechanism stayed off
    # Another run of the same task, newer, must not be the one the requeued job picks up.
    (tmp_path / "outputs" / "train" / "runs" / "newer" / "checkpoints").mkdir(parents=True)

    # SLURM starts the requeued job again: same job id, a restart count.
    again = sbatch(tmp_path, losses, SLURM_RESTART_COUNT="1")
    output, _ = again.communicate(timeout=300)
    assert again.returncode == 0, output[-3000:]
    assert f"resuming job {JOB} (restart 1) from ./outputs/train/runs/slurm-{JOB}" in output
    assert (tmp_path / "scontrol.log").read_text() == f"requeue {JOB}\n"  # not again
    expected = torch.load(reference / "checkpoints" / "last.ckpt", weights_only=True)
    actual = torch.load(last, weights_only=True)
    for key, tensor in expected["state_dict"].items():
        assert torch.equal(actual["state_dict"][key], tensor), key
    assert step_losses(losses) == step_losses(reference / "losses")
    assert (run_dir / "metrics.json").is_file()
