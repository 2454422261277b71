"""The few lines a run starts with: what trains on what, where, and where its files go.

The full resolved config is in the run directory (``config.yaml``) and its log file;
the screen gets this header, so the first epoch follows within a screenful.
"""

import os
from pathlib import Path

from lightning import LightningModule, Trainer

from platekit.config._precision import auto_reason
from platekit.config._threads import Threads
from platekit.data._info import DataInfo
from platekit.models._tasks import Task

# The header's field names, in order (tests/training/test_first_screen.py checks a real run's).
FIELDS = ("data", "task", "model", "device", "threads", "seed", "run dir")


def run_header(
    *,
    data_name: str,
    info: DataInfo,
    task: Task | None,
    model: LightningModule,
    trainer: Trainer,
    threads: Threads,
    precision_setting: str,
    seed: int,
    run_dir: Path,
    log_name: str,
) -> list[str]:
    """One line per field of ``FIELDS``, aligned: ``data      DigitsDataModule: ...``."""
    values = {
        "data": f"{data_name}: {data_sizes(info)}; {data_shape(info)}",
        "task": describe_task(task),
        "model": describe_model(model),
        "device": f"{trainer.strategy.root_device}, precision {trainer.precision} "
        f"({precision_reason(precision_setting, trainer)})"
        + (f", {trainer.world_size} processes" if trainer.world_size > 1 else ""),
        "threads": str(threads),
        "seed": str(seed),
        "run dir": f"{shown_path(run_dir)}  (config.yaml; full config in {log_name})",
    }
    return [f"{name:<9} {values[name]}" for name in FIELDS]


def precision_reason(setting: str, trainer: Trainer) -> str:
    """``trainer.precision=bf16-mixed`` as given, or why ``auto`` chose what it did."""
    if setting != "auto":
        return f"trainer.precision={setting}"
    return auto_reason(trainer.strategy.root_device.type)


def data_sizes(info: DataInfo) -> str:
    return ", ".join(f"{split} {size}" for split, size in info.split_sizes.items()) or "sizes ?"


def data_shape(info: DataInfo) -> str:
    sizes = [str(size) for size in info.input_shape]
    if info.varying_axis is not None:  # a sequence's length: "L<=40", or "L" with no limit
        limit = info.varying_axes[info.varying_axis]
        sizes[info.varying_axis] = "L" if limit is None else f"L<={limit}"
    shape = "x".join(sizes)
    targets = f"{info.num_classes} classes" if info.num_classes else "one value"
    return f"inputs {shape}, {targets}"


def describe_task(task: Task | None) -> str:
    if task is None:
        return "the model's own"
    return f"{type(task).__name__}, monitor {task.monitor} ({task.mode})"


def describe_model(model: LightningModule) -> str:
    net = getattr(model, "net", model)
    count = sum(parameter.numel() for parameter in model.parameters())
    return f"{type(net).__name__}, {count:,} parameters"


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it (shorter), else absolute."""
    try:
        return (
            os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
        )
    except ValueError:
        return str(path)
