"""DDP on CPU (gloo): Lightning's own launcher, torchrun over 2 "nodes", SLURM, a lost node.

Every run is a subprocess: Lightning re-launches the running script for its other ranks,
which inside pytest would be pytest itself. ``RankProbe`` records what each rank saw.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional
from torchmetrics.classification import MulticlassAccuracy

from platekit import testing
from platekit.testing import finish, free_port, kill_tree, probe

from support import (
    PACKAGE,
    ROOT,
    cli_env,
    compose_config,
    foreign_warnings,
    module,
    project_module,
    read_json,
)

pytestmark = pytest.mark.slow

WORLD = 2
STEPS_PER_EPOCH = 10  # 1258 train rows / 2 ranks = 629 rows each, in batches of 64
# fp32, so the probe's weights can be checked against an evaluation in this process.
SHORT = ["callbacks.progress_bar=null", "trainer.precision=32-true"]


def launch(command: list[str], log: Path, **env: str) -> subprocess.Popen:
    """Start ``command`` in the project's folder with ``src`` and this folder importable."""
    return testing.launch(command, log, env=cli_env(), **env)


def train(log: Path, *overrides: str, **env: str) -> subprocess.Popen:
    """``python -m <package>.train overrides...``; Lightning starts the other ranks itself."""
    return launch([sys.executable, "-m", f"{PACKAGE}.train", *overrides], log, **env)


def torchrun_node(node_rank: int, port: int, run_name: str, log: Path, *overrides: str):
    """One "node": ``scripts/torchrun.sh 2 1`` in its own process tree."""
    return launch(
        ["bash", "scripts/torchrun.sh", str(WORLD), "1", "trainer=ddp_cpu", *overrides],
        log,
        NODE_RANK=str(node_rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RUN_NAME=run_name,
        RDZV_TIMEOUT="120",
    )


def expected_inputs(rank: int, epoch: int) -> torch.Tensor:
    """The training inputs ``rank`` must see in ``epoch``: a function of (seed, epoch) only."""
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup()
    sampler = module("data._sampling").EpochBatchSampler(
        len(datamodule.split_tensors("train")),
        64,
        shuffle=True,
        seed=0,
        rank=rank,
        world_size=WORLD,
    )
    sampler.set_epoch(epoch)
    return datamodule.split_tensors("train").inputs[torch.cat(list(sampler))]


def check_ranks(probe_dir: Path, epochs: list[int], tmp_path: Path) -> dict[str, Any]:
    """The DDP properties, from the probe files of both ranks; returns rank 0's final state."""
    # Each rank saw its own shard of the (seed, epoch) order: disjoint, together everything.
    for epoch in epochs:
        shards = [torch.load(probe_dir / f"inputs_rank{r}_epoch{epoch}.pt") for r in (0, 1)]
        for rank, shard in enumerate(shards):
            assert torch.equal(shard, expected_inputs(rank, epoch)), (rank, epoch)
        assert len(shards[0]) == len(shards[1]) == 629
    # Training kept the ranks in lockstep: identical weights (and BN statistics).
    finals = [torch.load(probe_dir / f"final_rank{r}.pt") for r in (0, 1)]
    for name, tensor in finals[0]["state_dict"].items():
        assert torch.equal(tensor, finals[1]["state_dict"][name]), name
    # Validation metrics were reduced over both shards: every rank got the full-set value.
    assert finals[0]["val"] == finals[1]["val"]
    digits = project_module("data").DigitsDataModule(seed=0)
    cfg = compose_config(tmp_path)
    model = module("models._build").build_model(
        cfg.model, digits.info, optimizer=cfg.optimizer, scheduler=cfg.scheduler
    )
    model.load_state_dict(finals[0]["state_dict"])
    model.eval()
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup()
    val = datamodule.split_tensors("val")
    with torch.no_grad():
        logits = model(val.inputs)
    hits = int((logits.argmax(dim=1) == val.targets).sum())
    assert finals[0]["val"]["val/acc"] == hits / len(val.targets)  # counts over both shards
    balanced = MulticlassAccuracy(10)(logits, val.targets).item()  # every class is in val
    assert finals[0]["val"]["val/balanced_acc"] == pytest.approx(balanced, abs=1e-6)
    loss = functional.cross_entropy(logits, val.targets).item()
    assert finals[0]["val"]["val/loss"] == pytest.approx(loss, rel=1e-4)
    return finals[0]


def only_rank_zero_wrote(rank_zero_dir: Path, other_dir: Path) -> None:
    """Rank 0's run directory holds the results; the other rank's holds only its own log."""
    assert (rank_zero_dir / "metrics.json").is_file()
    assert (rank_zero_dir / "checkpoints" / "last.ckpt").is_file()
    written = {p.name for p in other_dir.iterdir()}
    assert written <= {"config.yaml", "train.log", ".hydra"}, written


def test_ddp_cpu_two_processes_then_resume(tmp_path: Path) -> None:
    log = tmp_path / "first.log"
    first = train(
        log, "trainer=ddp_cpu", "trainer.max_epochs=1", *SHORT, *probe(tmp_path / "p1"),
        f"paths.root_dir={tmp_path / 'first'}",
    )  # fmt: skip
    finish([first], [log])
    assert foreign_warnings(log.read_text()) == []  # sync_dist advice included
    [run_dir] = (tmp_path / "first" / "outputs" / "train" / "runs").iterdir()
    metrics = read_json(run_dir / "metrics.json")
    assert metrics["world_size"] == WORLD
    assert (metrics["epochs"], metrics["steps"]) == (1, STEPS_PER_EPOCH)
    check_ranks(tmp_path / "p1", [0], tmp_path)
    # Lightning's launcher gives rank 1 the same directory, with its own log file; rank 0
    # alone holds the directory's lock.
    assert {p.name for p in run_dir.iterdir()} == {
        ".hydra", ".run.lock", "checkpoints", "config.yaml", "csv", "metrics.json", "plots",
        "train.log", "train_ddp_process_1.log",
    }  # fmt: skip

    # Stopped after epoch 1 of 2: resume from last.ckpt and finish the second epoch.
    log = tmp_path / "resumed.log"
    resumed = train(
        log, "trainer=ddp_cpu", "trainer.max_epochs=2", *SHORT, *probe(tmp_path / "p2"),
        f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}",
        f"paths.root_dir={tmp_path / 'second'}",
    )  # fmt: skip
    finish([resumed], [log])
    # A resumed run continues in the run directory its checkpoint came from.
    assert not (tmp_path / "second" / "outputs").exists()
    metrics = read_json(run_dir / "metrics.json")
    assert (metrics["epochs"], metrics["steps"]) == (2, 2 * STEPS_PER_EPOCH)
    assert not (tmp_path / "p2" / "inputs_rank0_epoch0.pt").exists()  # epoch 0 not redone
    check_ranks(tmp_path / "p2", [1], tmp_path)


def test_torchrun_two_nodes_over_loopback(tmp_path: Path) -> None:
    port = free_port()
    common = [*SHORT, "trainer.max_epochs=1", *probe(tmp_path / "probe"),
              f"paths.root_dir={tmp_path}"]  # fmt: skip
    logs = [tmp_path / f"node{n}.log" for n in (0, 1)]
    # Each node its own process tree and, to see who writes what, its own run directory.
    nodes = [torchrun_node(n, port, f"node{n}", logs[n], *common) for n in (0, 1)]
    finish(nodes, logs)
    runs = tmp_path / "outputs" / "train" / "runs"
    metrics = read_json(runs / "node0" / "metrics.json")
    assert metrics["world_size"] == WORLD
    assert (metrics["epochs"], metrics["steps"]) == (1, STEPS_PER_EPOCH)
    check_ranks(tmp_path / "probe", [0], tmp_path)
    only_rank_zero_wrote(runs / "node0", runs / "node1")


def test_slurm_environment_forms_a_world_of_two(tmp_path: Path) -> None:
    """Two tasks started by hand with what ``srun`` sets for a 2-node x 1-task job."""
    port = free_port()
    slurm = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "train",  # not bash/interactive: a batch job
        "SLURM_NTASKS": "2",
        "SLURM_NNODES": "2",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_LOCALID": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RUN_NAME": "slurm-4242",
    }
    overrides = ["trainer=ddp_cpu", *SHORT, "trainer.max_epochs=1",
                 "+trainer.limit_train_batches=2", f"paths.root_dir={tmp_path}"]  # fmt: skip
    logs = [tmp_path / f"task{r}.log" for r in (0, 1)]
    tasks = [
        train(logs[r], *overrides, **slurm, SLURM_PROCID=str(r), SLURM_NODEID=str(r))
        for r in (0, 1)
    ]
    finish(tasks, logs)
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in logs[1].read_text()
    metrics = read_json(tmp_path / "outputs" / "train" / "runs" / "slurm-4242" / "metrics.json")
    assert metrics["world_size"] == WORLD
    assert metrics["steps"] == 2


def test_lost_node_stops_the_survivor_and_keeps_the_checkpoint(tmp_path: Path) -> None:
    port = free_port()
    common = [*SHORT, "trainer.max_epochs=100", "callbacks.early_stopping=null",
              f"paths.root_dir={tmp_path}"]  # fmt: skip
    logs = [tmp_path / f"node{n}.log" for n in (0, 1)]
    nodes = [torchrun_node(n, port, f"node{n}", logs[n], *common) for n in (0, 1)]
    last = tmp_path / "outputs" / "train" / "runs" / "node0" / "checkpoints" / "last.ckpt"
    try:
        deadline = time.monotonic() + 240
        while not last.is_file():
            assert time.monotonic() < deadline, logs[0].read_text()[-3000:]
            assert nodes[0].poll() is None, logs[0].read_text()[-3000:]
            time.sleep(0.5)
        kill_tree(nodes[1].pid)
        killed = time.monotonic()
        nodes[0].wait(timeout=120)
        survived = time.monotonic() - killed
    finally:
        for node in nodes:
            kill_tree(node.pid)
    output = logs[0].read_text()
    assert nodes[0].returncode != 0
    assert survived < 60, f"the survivor took {survived:.0f} s to stop"
    # gloo names the address of the peer it lost ("Connection closed by peer [ip]:port" or
    # "Read error [ip]:port: Connection reset by peer"); torchrun reports the failed rank.
    assert re.search(r"\[127\.0\.0\.1\]:\d+.*by peer|by peer \[127\.0\.0\.1\]:\d+", output), output
    assert "FAILED" in output
    checkpoint = module("checkpoints._io").load_checkpoint(last)
    model = module("models").TaskModule(**checkpoint["hyper_parameters"])
    model.load_state_dict(checkpoint["state_dict"])
    assert checkpoint["epoch"] >= 0


def test_ddp_epoch_lines_and_summary_give_one_steps_per_second(tmp_path: Path) -> None:
    """Under 2-process gloo DDP the epoch lines and the summary time the same training
    seconds (validation, start-up and process launch out of both)."""
    log = tmp_path / "ddp.log"
    run = train(
        log, "trainer=ddp_cpu", "trainer.max_epochs=2", "trainer.precision=32-true",
        f"paths.root_dir={tmp_path}",
    )  # fmt: skip
    finish([run], [log])
    output = log.read_text()
    rates = [float(r.replace(",", "")) for r in re.findall(r"  ([\d,]+) steps/s\n", output)]
    assert len(rates) == 2, output[-3000:]  # one line per epoch, from rank 0 only
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    metrics = read_json(run_dir / "metrics.json")
    assert metrics["train_steps"] == 2 * STEPS_PER_EPOCH
    assert min(rates) - 0.5 <= metrics["steps_per_second"] <= max(rates) + 0.5, (rates, metrics)
    assert re.search(rf"steps/s +{metrics['steps_per_second']:,.1f}\n", output)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_stop_signal_to_every_rank_saves_and_exits_cleanly(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """The terminal of a foreground DDP run closes (SIGHUP to its whole process group) or a
    scheduler stops it: every rank stops after the same step, rank 0 saves, all exit 0."""
    losses, log = tmp_path / "losses", tmp_path / "run.log"
    command = [
        sys.executable, "-m", f"{PACKAGE}.train", "trainer=ddp_cpu", "trainer.max_epochs=6",
        *SHORT, "callbacks.early_stopping=null", *testing.loss_logging(losses),
        f"paths.root_dir={tmp_path}",
    ]  # fmt: skip
    with log.open("w") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env=cli_env(), stdout=output, stderr=output, start_new_session=True
        )
    deadline = time.monotonic() + 180
    while not (losses.is_file() and len(losses.read_text().splitlines()) >= 5 * WORLD):
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.01)
    os.killpg(process.pid, signum)
    try:
        assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        kill_tree(process.pid)
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    saved = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    steps = [int(line.split()[0]) for line in losses.read_text().splitlines()]  # every rank's
    assert 5 <= saved < 6 * STEPS_PER_EPOCH
    assert max(steps) == saved  # no rank ran a step past the saved one
    assert steps.count(saved) == WORLD  # and each ran it
    text = log.read_text()
    assert text.count(f"stopped by {signum.name} after step {saved}; saved") == WORLD, text[-3000:]
    assert "Traceback" not in text
