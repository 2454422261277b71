"""A resumed run continues its tracker run: one training run is one W&B / MLflow run."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from support import CONFIG_DIR, PACKAGE, cli_env, module, run_cli

TRACKERS = sorted(
    name for name in ("wandb", "mlflow") if (CONFIG_DIR / "logger" / f"{name}.yaml").is_file()
)
ARGS = [
    "trainer.max_epochs=3",
    "trainer.accelerator=cpu",
    "trainer.log_every_n_steps=1",
    "callbacks.progress_bar=null",
    "callbacks.early_stopping=null",
]
STEPS = 60  # optimizer steps per run: 3 epochs of 20 batches


def logger_group() -> OmegaConf:
    return OmegaConf.create(
        {
            "csv": {"_target_": "platekit.training._csv_logger.ResumableCSVLogger"},
            "wandb": {"_target_": "lightning.pytorch.loggers.WandbLogger", "offline": True},
            "mlflow": {"_target_": "lightning.pytorch.loggers.MLFlowLogger", "run_id": None},
        }
    )


def test_the_checkpoints_run_ids_go_into_the_logger_configs() -> None:
    loggers = logger_group()
    checkpoint = {"logger_runs": {"wandb": "k3x9", "mlflow": "3f2a"}}
    continued = module("training._logger_runs").continue_logger_runs(loggers, checkpoint)
    assert continued.wandb.id == "k3x9"
    assert continued.mlflow.run_id == "3f2a"
    assert set(continued.csv) == {"_target_"}
    assert loggers == logger_group()  # the input is kept as it was


def test_a_run_id_set_in_the_config_wins_and_a_fresh_run_changes_nothing() -> None:
    continue_logger_runs = module("training._logger_runs").continue_logger_runs
    loggers = logger_group()
    loggers.mlflow.run_id = "mine"
    continued = continue_logger_runs(loggers, {"logger_runs": {"mlflow": "3f2a"}})
    assert continued.mlflow.run_id == "mine"
    assert continue_logger_runs(loggers, None) is loggers
    assert continue_logger_runs(loggers, {"state_dict": {}}) is loggers


def start_training(cwd: Path, tracker: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.train", *ARGS, f"logger={tracker}"],
        cwd=cwd,
        env=cli_env(WANDB_SILENT="true"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def interrupt_then_resume(cwd: Path, tracker: str) -> tuple[Path, int]:
    """Train, SIGTERM it in epoch 1, resume with ``ckpt_path=last``; the run dir and the
    step the signal stopped it at."""
    process = start_training(cwd, tracker)
    checkpoints = cwd / "outputs" / "train" / "runs"
    deadline = time.monotonic() + 180
    # The first epoch's last.ckpt exists once step 20 is done: stop it in the second epoch.
    while not list(checkpoints.glob("*/checkpoints/last.ckpt")):
        assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "training never wrote last.ckpt"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output[-3000:]
    [run_dir] = checkpoints.iterdir()
    last = run_dir / "checkpoints" / "last.ckpt"
    stopped_at = torch.load(last, weights_only=True)["global_step"]
    assert 20 <= stopped_at < 40, output[-3000:]

    result = run_cli("train", *ARGS, f"logger={tracker}", "ckpt_path=last", cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert torch.load(last, weights_only=True)["global_step"] == STEPS
    return run_dir, stopped_at


@pytest.mark.slow
@pytest.mark.skipif("mlflow" not in TRACKERS, reason="baked without logger=mlflow")
def test_mlflow_a_resumed_run_is_the_same_run_with_continuous_steps(tmp_path: Path) -> None:
    run_dir, _ = interrupt_then_resume(tmp_path, "mlflow")
    with sqlite3.connect(tmp_path / "outputs" / "mlflow.db") as db:
        runs = db.execute("SELECT run_uuid, status FROM runs").fetchall()
        steps = {
            key: sorted(s for (s,) in db.execute("SELECT step FROM metrics WHERE key=?", (key,)))
            for key in ("train/grad_norm", "val/acc", "test/acc")
        }
    [(run_id, status)] = runs
    assert status == "FINISHED"
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["logger_runs"] == {"mlflow": run_id}
    # Every step logged once, before and after the signal: nothing repeated, nothing missing.
    assert steps["train/grad_norm"] == list(range(STEPS))
    assert steps["val/acc"] == [19, 39, 59]  # epoch 0 before the signal, 1 and 2 after
    assert steps["test/acc"] == [STEPS]


@pytest.mark.slow
@pytest.mark.skipif("wandb" not in TRACKERS, reason="baked without logger=wandb")
def test_wandb_offline_parts_of_a_resumed_run_share_one_run_id(tmp_path: Path) -> None:
    from wandb_records import history  # baked only with logger=wandb

    run_dir, stopped_at = interrupt_then_resume(tmp_path, "wandb")
    parts = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(parts) == 2  # W&B offline writes each start to its own folder
    ids = {part.name.rsplit("-", 1)[1] for part in parts}
    [run_id] = ids
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["logger_runs"] == {"wandb": run_id}
    assert all((part / f"run-{run_id}.wandb").stat().st_size > 0 for part in parts)
    # Lightning's step axis for W&B charts, trainer/global_step, carries on where the first
    # part stopped; W&B's own _step restarts at 0 in the second part (offline, it cannot know).
    first, second = (history(part / f"run-{run_id}.wandb") for part in parts)
    steps = [row["trainer/global_step"] for row in first + second if "train/grad_norm" in row]
    assert steps == list(range(STEPS))
    assert max(row["trainer/global_step"] for row in first) == stopped_at - 1
    assert second[0]["_step"] == 0
