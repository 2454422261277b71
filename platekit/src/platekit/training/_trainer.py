"""The pieces every entry point shares: seeding, the run directory, the final report."""

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from lightning import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.loggers import Logger
from lightning.pytorch.plugins.precision import Precision
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError
from platekit._registry import active
from platekit.config._nodes import instantiate_each, save_config, to_plain
from platekit.config._precision import resolve_precision
from platekit.config._rules import flag
from platekit.config._schema import declare
from platekit.data._adapters import data_info, is_contract
from platekit.data._info import DataInfo
from platekit.models._build import build_model
from platekit.models._tasks import Task, target_statistics
from platekit.training._checkpointing import PreemptibleCheckpoint
from platekit.training._logger_runs import LoggerRuns, continue_logger_runs
from platekit.training._slurm import cluster_plugins

log = logging.getLogger(__name__)

declare({"compile": flag()})


def prepare_run(cfg: DictConfig) -> Path:
    """Seed everything (0 included) and save the resolved config in the run directory."""
    seed_everything(cfg.seed, workers=True, verbose=False)  # the run header shows the seed
    return save_config(cfg)


def build_trainer(
    cfg: DictConfig,
    callbacks: list[Callback] | None = None,
    resumed: dict[str, Any] | None = None,
    task: Task | None = None,
    announce_precision: bool = True,
    **overrides: Any,
) -> Trainer:
    """The Trainer from ``cfg.trainer`` with the configured callbacks and logger.

    Lightning's distributed sampler stays off unless ``use_distributed_sampler=True`` is
    passed: the project's data modules shard their own batches (a plain data module needs
    it on, see ``distributed_sampler``). ``resumed``, the content of the checkpoint a run
    resumes from, makes W&B and MLflow continue its runs (see ``training/_logger_runs.py``).
    Callbacks configured with ``monitor: null`` and ``mode: null`` (checkpoint selection,
    early stopping) follow ``task``'s monitored metric. ``announce_precision=False``
    leaves the precision chosen to the caller's own report (train's run header).
    """
    if cfg.trainer.get("accelerator") in ("gpu", "cuda") and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        raise UserError(
            f"trainer.accelerator={cfg.trainer.accelerator} but no CUDA device is visible "
            f"(torch {torch.__version__} is {build}); use trainer=cpu, or install a CUDA "
            "build of torch (see README: 'CUDA or CPU torch')"
        )
    precision = resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    callback_cfgs = cfg.get("callbacks")
    if task is not None and callback_cfgs:
        callback_cfgs = following_task(callback_cfgs, task)
    built: list[Callback] = instantiate_each(callback_cfgs)
    loggers: list[Logger] = instantiate_each(continue_logger_runs(cfg.get("logger"), resumed))
    trainer: Trainer = instantiate(
        cfg.trainer,
        callbacks=built + (callbacks or []) + [LoggerRuns()],
        logger=loggers or False,
        plugins=[*instantiate(cfg.trainer.get("plugins") or []), *cluster_plugins()],
        **{"precision": precision, "use_distributed_sampler": False, **overrides},
    )
    # Lightning sets trainer.callbacks outside Trainer.
    for callback in trainer.callbacks:  # type: ignore[attr-defined]
        if isinstance(callback, PreemptibleCheckpoint):
            callback.continues_run = resumed is not None
    if trainer.is_global_zero and announce_precision:
        log.info("precision: %s (trainer.precision=%s)", trainer.precision, cfg.trainer.precision)
    return trainer


SHIPPED_PRECISION = "32-true"  # what export writes into model.onnx and predict computes in


@contextmanager
def as_shipped(trainer: Trainer, model: LightningModule) -> Iterator[None]:
    """Test ``model`` in float32 without autocast, as ``model.onnx`` and predict compute.

    A run that trained in ``bf16-mixed`` (or a ``*-true`` half precision) would otherwise
    test in it: its figures would not be those of the model it ships. The trainer's
    precision plugin is Lightning's plain one for the duration; the net's weights are cast
    to float32, which they already are under a mixed precision.
    """
    strategy = trainer.strategy
    trained = strategy.precision_plugin
    strategy.precision_plugin = Precision()
    model.float()
    try:
        yield
    finally:
        strategy.precision_plugin = trained


def test_precision(cfg: DictConfig, given: set[str]) -> str:
    """The precision an evaluation runs at: the shipped model's unless ``trainer.precision``
    was ``given`` on the command line."""
    if "trainer.precision" in given:
        return resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    return SHIPPED_PRECISION


def build_parts(cfg: DictConfig) -> tuple[LightningDataModule, LightningModule, DataInfo]:
    """The data module (set up), the model sized for its data, and the data's metadata."""
    # Through the registry: a resumed run's data settings come from its checkpoint.
    datamodule = active().build(to_plain(cfg.data), "data", "data")
    info = data_info(datamodule, OmegaConf.select(cfg, "model.task.num_classes"))
    return datamodule, model_for(cfg, datamodule, info), info


def model_for(cfg: DictConfig, datamodule: LightningDataModule, info: DataInfo) -> LightningModule:
    """The model of ``cfg`` (model, optimizer and scheduler groups) for this data."""
    stats, targets = None, None
    if is_contract(datamodule):
        targets = datamodule.targets("train")
        if info.target_kind == "value":
            stats = target_statistics(targets)
    return build_model(
        cfg.model,
        info,
        optimizer=cfg.get("optimizer"),
        scheduler=cfg.get("scheduler"),
        target_stats=stats,
        train_targets=targets if info.target_kind == "class" else None,
        compile=cfg.get("compile", False),
    )


def following_task(callbacks: Any, task: Task) -> dict[str, Any]:
    """``callbacks`` with every ``monitor: null, mode: null`` pair set to the task's metric."""
    filled: dict[str, Any] = dict(to_plain(callbacks))
    for name, node in filled.items():
        if (
            isinstance(node, dict)
            and node.get("monitor", 0) is None
            and node.get("mode", 0) is None
        ):
            filled[name] = {**node, "monitor": task.monitor, "mode": task.mode}
    return filled


def data_overrides(cfg: DictConfig) -> dict[str, Any]:
    """The ``data.<setting>=`` values given to eval or export, over the checkpoint's own."""
    data = cfg.get("data")
    if data is not None and not OmegaConf.is_dict(data):
        raise UserError(
            f"data={data}: eval and export use the checkpoint's own data module; change one "
            "of its settings with data.<setting>=..., e.g. data.path=/new/table.csv"
        )
    return to_plain(data) if data else {}


def distributed_sampler(datamodule: LightningDataModule) -> bool:
    """Whether Lightning must shard the loaders: yes for data modules that do not do it."""
    return not is_contract(datamodule)


def as_floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Logged metrics (name -> tensor or number) as plain floats."""
    return {name: float(value) for name, value in metrics.items()}
