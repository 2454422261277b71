"""One run per run directory: an OS lock held by the run's process, refused runs touch nothing.

Real processes throughout: helpers that hold the lock, training runs, SIGKILL.
"""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from support import QUICK, cli_env, module, run_cli, start_cli

# Holds the lock of argv[2] (as rank RANK, if set) until its stdin closes. argv: package, dir.
HOLDER = """
import importlib, pathlib, sys
run_lock = importlib.import_module(sys.argv[1] + ".training._run_lock")
run_lock.hold_run_lock(pathlib.Path(sys.argv[2]))
print("held", flush=True)
sys.stdin.read()
"""


def start_holder(run_dir: Path, **env: str) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "platekit", str(run_dir)],
        env=cli_env(**env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_second_run_is_refused_naming_the_holder_until_the_holder_is_killed(
    tmp_path: Path,
) -> None:
    run_lock = module("training._run_lock")
    holder = start_holder(tmp_path)
    with pytest.raises(module("_errors").UserError) as refused:
        run_lock.hold_run_lock(tmp_path)
    message = str(refused.value)
    assert f"pid {holder.pid} on" in message
    assert str(tmp_path) in message
    assert "\n" not in message
    holder.kill()  # SIGKILL: no clean-up runs, the kernel drops the lock
    holder.wait()
    run_lock.hold_run_lock(tmp_path)  # the lock file is still there, and locks no one out
    assert (tmp_path / run_lock.LOCK_FILE).is_file()


def test_other_ranks_of_a_run_share_rank_zeros_directory(tmp_path: Path) -> None:
    rank_zero = start_holder(tmp_path)
    for env in ({"RANK": "1"}, {"LOCAL_RANK": "1", "NODE_RANK": "0"}, {"SLURM_PROCID": "3"}):
        start_holder(tmp_path, **env).communicate("")  # would be refused if it tried to lock
    rank_zero.communicate("")


@pytest.mark.parametrize(
    ("env", "is_zero"),
    [
        ({}, True),
        ({"RANK": "0", "LOCAL_RANK": "0", "SLURM_PROCID": "4"}, True),  # torchrun inside SLURM
        ({"RANK": "3", "LOCAL_RANK": "0"}, False),
        ({"LOCAL_RANK": "1", "NODE_RANK": "0"}, False),  # Lightning's launcher, rank 1
        ({"LOCAL_RANK": "0", "NODE_RANK": "1"}, False),
        ({"SLURM_PROCID": "0"}, True),
        ({"SLURM_PROCID": "2"}, False),
        ({"SLURM_PROCID": "0", "LOCAL_RANK": "1"}, False),  # Lightning's launcher in salloc
    ],
)
def test_global_rank_zero_is_known_at_start(env: dict[str, str], is_zero: bool) -> None:
    assert module("training._run_lock").launched_as_global_zero(env) is is_zero


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_lock_holder_removes_temporaries_of_dead_writers_only(tmp_path: Path) -> None:
    files = module("_files")
    host = files.writer_tag().split("@")[1]
    (tmp_path / "checkpoints").mkdir()
    dead = tmp_path / "checkpoints" / f".last.ckpt.{dead_pid()}@{host}.k2j4x9a1.tmp"
    live = tmp_path / f".config.yaml.{files.writer_tag()}.q8w7e6r5.tmp"
    elsewhere = tmp_path / f".metrics.json.{dead_pid()}@{host}x.a1b2c3d4.tmp"  # another host
    foreign = tmp_path / ".notes.tmp"
    for path in (dead, live, elsewhere, foreign):
        path.write_bytes(b"partial")
    module("training._run_lock").hold_run_lock(tmp_path)
    assert not dead.exists()
    assert live.exists()
    assert elsewhere.exists()
    assert foreign.exists()


def test_write_atomic_names_its_temporary_after_its_writer(tmp_path: Path) -> None:
    files = module("_files")
    names: list[str] = []

    def write(tmp: Path) -> None:
        names.append(tmp.name)
        tmp.write_text("x")

    files.write_atomic(tmp_path / "a.txt", write)
    assert re.fullmatch(rf"\.a\.txt\.{re.escape(files.writer_tag())}\.[^.]+\.tmp", names[0])
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def wait_for_file(path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def seed_in(path: Path) -> int:
    return yaml.safe_load(path.read_text())["seed"]


@pytest.mark.slow
def test_two_runs_started_together_in_one_directory_one_is_refused(tmp_path: Path) -> None:
    same = [*QUICK, f"hydra.run.dir={tmp_path / 'run'}"]
    runs = {seed: start_cli("train", *same, f"seed={seed}", cwd=tmp_path) for seed in (1, 2)}
    outputs = {seed: "".join(process.communicate(timeout=300)) for seed, process in runs.items()}
    codes = {seed: process.returncode for seed, process in runs.items()}
    [winner] = [seed for seed, code in codes.items() if code == 0]
    [loser] = [seed for seed, code in codes.items() if code == 1]
    [line] = [line for line in outputs[loser].splitlines() if line.startswith("error:")]
    assert f"pid {runs[winner].pid} on" in line
    assert "in use" in line

    run_dir = tmp_path / "run"
    assert (run_dir / "metrics.json").is_file()
    assert seed_in(run_dir / "config.yaml") == winner
    assert seed_in(run_dir / ".hydra" / "config.yaml") == winner
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["datamodule_hyper_parameters"]["seed"] == winner
    assert "in use" not in (run_dir / "train.log").read_text()


@pytest.mark.slow
def test_a_resume_is_refused_while_its_run_still_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*QUICK, f"hydra.run.dir={run_dir}", "trainer.max_epochs=1000", "seed=1"]
    every_5 = "callbacks.model_checkpoint.last_every_n_steps=5"
    first = start_cli("train", *args, every_5, cwd=tmp_path)
    last = run_dir / "checkpoints" / "last.ckpt"
    wait_for_file(last, first)
    before = {p: p.read_bytes() for p in [run_dir / "config.yaml", *run_dir.glob(".hydra/*")]}

    resumed = run_cli("train", *QUICK, f"ckpt_path={last}", "seed=2", cwd=tmp_path)
    assert resumed.returncode == 1
    assert f"in use by the run of pid {first.pid} on" in resumed.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert "in use" not in (run_dir / "train.log").read_text()

    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out[-2000:] + err[-2000:]
    assert seed_in(run_dir / "config.yaml") == 1
