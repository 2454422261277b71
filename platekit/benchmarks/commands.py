"""How fast the other commands start: predict (ONNX and checkpoint), eval and export.

A short real run writes a checkpoint and exports it; then each command runs in a fresh
process, as a user runs it, and is timed from launch to exit. The goals: ONNX predict of
one input within 1 s (it imports neither torch nor Lightning), and checkpoint predict,
eval and export within ``import lightning`` + 1 s, the floor any command that loads a
Lightning checkpoint pays.
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.startup import child_env, import_lightning_seconds
from platekit._errors import UserError
from platekit._project import current

TARGET_ONNX_PREDICT_S = 1.0
TARGET_ABOVE_IMPORT_S = 1.0


def measure_commands(train_overrides: list[str], runs: int) -> dict[str, Any]:
    """The fastest of ``runs`` launches of each command, with the bare-import floor."""
    with tempfile.TemporaryDirectory(prefix="commands-") as workdir:
        root = Path(workdir)
        checkpoint, model, one_input = prepare(root, train_overrides)
        commands = {
            "predict_onnx": ["predict", f"model_path={model}", f"inputs={one_input}"],
            "predict_checkpoint": ["predict", f"model_path={checkpoint}", f"inputs={one_input}"],
            "eval": ["eval", f"ckpt_path={checkpoint}"],
            "export": ["export", f"ckpt_path={checkpoint}", "repeats=1", "batch_sizes=[1,2]"],
        }
        seconds = {
            name: min(timed(args, root / f"{name}{run}") for run in range(runs))
            for name, args in commands.items()
        }
    floor = min(import_lightning_seconds("wall") for _ in range(runs))
    return {
        "seconds": seconds,
        "import_lightning_seconds": floor,
        "target_onnx_predict_s": TARGET_ONNX_PREDICT_S,
        "target_above_import_s": TARGET_ABOVE_IMPORT_S,
        "runs": runs,
    }


def prepare(root: Path, train_overrides: list[str]) -> tuple[Path, Path, Path]:
    """A checkpoint of a few steps, its model.onnx, and one raw input as a .npy."""
    short = [
        "trainer.max_epochs=1",
        "+trainer.limit_train_batches=2",
        "callbacks.progress_bar=null",
    ]
    run(["train", *train_overrides, *short], root / "train")
    [checkpoint] = (root / "train").rglob("last.ckpt")
    run(["export", f"ckpt_path={checkpoint}", "repeats=1", "batch_sizes=[1,2]"], root / "export")
    [model] = (root / "export").rglob("model.onnx")
    from platekit.checkpoints._restore import Checkpoint
    from platekit.data._base import BaseDataModule

    datamodule = Checkpoint.open(checkpoint).datamodule(check=())
    if not isinstance(datamodule, BaseDataModule):
        raise UserError(
            f"bench times predict on raw inputs, which {type(datamodule).__name__} does not "
            "give (not a BaseDataModule, data/_base.py); run bench with a contract data module"
        )
    one_input = root / "one.npy"
    np.save(one_input, datamodule.raw_inputs("test", limit=1).numpy())
    return checkpoint, model, one_input


def timed(args: list[str], root: Path) -> float:
    started = time.perf_counter()
    run(args, root)
    return time.perf_counter() - started


def run(args: list[str], root: Path) -> None:
    entry, *overrides = args
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            f"{current().package}.{entry}",
            *overrides,
            f"paths.root_dir={root}",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"`{entry}` failed in the benchmark:\n{result.stdout[-3000:]}")
