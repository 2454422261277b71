"""Timed training loops: the project's Lightning loop, bare Lightning, and the plain PyTorch
loop they are held to.

Both time the same number of steps after the same warm-up, on the same model, data, batch
size and precision. Neither validates nor saves checkpoints inside the timed steps.
"""

import copy
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from lightning import Callback, LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig
from torch import Tensor

from platekit._errors import UserError
from platekit.commands._bench import NEVER, Clock, synchronize, timed_fit
from platekit.data._base import BaseDataModule
from platekit.models._task_module import TaskModule
from platekit.training._history import MetricHistory
from platekit.training._trainer import build_trainer

AUTOCAST_DTYPES = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
# wall: real elapsed time. cpu: this process's CPU time, steadier on a machine other work
# shares, and the same thing as wall time for a single-threaded CPU run left alone.
CLOCKS: dict[str, Clock] = {"wall": time.perf_counter, "cpu": time.process_time}


def lightning_loop(
    cfg: DictConfig,
    model: LightningModule,
    datamodule: LightningDataModule,
    *,
    steps: int,
    warmup: int,
    clock: Clock = time.perf_counter,
    bare: bool = False,
    **trainer_overrides: Any,
) -> tuple[float, Trainer]:
    """Seconds for ``steps`` steps of the project's own Trainer, callbacks and loggers, timed
    as ``make bench`` times them (``platekit.commands._bench.timed_fit``).

    ``bare=True`` drops every callback, logger and checkpoint instead: what Lightning and
    the LightningModule cost on their own.
    """
    if bare:
        cfg = copy.deepcopy(cfg)
        cfg.callbacks, cfg.logger = None, None
        trainer_overrides |= {"callbacks": [], "enable_checkpointing": False}
    timer, trainer = timed_fit(
        cfg, model, datamodule, steps=steps, warmup=warmup, clock=clock, **trainer_overrides
    )
    return timer.seconds, trainer


class BoundaryClock(Callback):
    """Time from one training batch's end to the next, split into in-epoch and cross-epoch.

    The interval that ends with an epoch's first batch also holds the previous epoch's end
    (callbacks, checkpoint write) and this one's start (loader, sampler): its excess over an
    ordinary step is what an epoch boundary costs.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last: float | None = None
        self.steps: list[float] = []
        self.boundaries: list[float] = []

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, index: int
    ) -> None:
        synchronize(pl_module.device)
        now = self.clock()
        if self.last is not None:
            (self.boundaries if index == 0 else self.steps).append(now - self.last)
        self.last = now


def boundary_loop(
    cfg: DictConfig,
    model: LightningModule,
    datamodule: LightningDataModule,
    *,
    epochs: int,
    clock: Clock = time.perf_counter,
) -> BoundaryClock:
    """Whole epochs of the project's loop, as a run trains them (last.ckpt written at each
    epoch end), validation aside; returns the intervals measured."""
    timer = BoundaryClock(clock)
    task = getattr(model, "task", None)
    callbacks: list[Callback] = [MetricHistory(), timer]
    trainer = build_trainer(
        cfg,
        callbacks=callbacks,
        task=task,
        max_epochs=epochs,
        max_steps=-1,
        check_val_every_n_epoch=NEVER,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        announce_precision=False,  # the table's first line shows it, once
    )
    # The writes are real, but into a folder of their own that goes with the benchmark.
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as scratch:
        for callback in trainer.checkpoint_callbacks:
            if isinstance(callback, ModelCheckpoint):
                callback.dirpath = scratch
        trainer.fit(model, datamodule=datamodule)
    return timer


def plain_loop(
    model: LightningModule,
    inputs: Tensor,
    targets: Tensor,
    *,
    batch_size: int,
    steps: int,
    warmup: int,
    precision: str,
    clock: Clock = time.perf_counter,
) -> float:
    """Seconds for ``steps`` steps of a hand-written loop; the fastest a loop gets.

    Shuffled batches are sliced from tensors already on the model's device: no DataLoader,
    no hooks, no logging. The optimizer and loss are the model's own (no lr schedule).
    """
    if not isinstance(model, TaskModule):
        raise UserError(
            f"bench's plain loop needs a TaskModule (models/_task_module.py), not "
            f"{type(model).__name__}; use model=... with a TaskModule, or skip bench"
        )
    device = inputs.device
    optimizer = model.build_optimizer()
    loss_of = model.task.loss
    autocast = autocast_for(precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "16-mixed")
    net = model.net.train()
    step = 0
    started = clock()
    while True:
        order = torch.randperm(len(inputs), device=device)
        for index in order.split(batch_size):
            with autocast:
                loss = loss_of(net(inputs[index]), targets[index])
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            if step == warmup:
                synchronize(device)
                started = clock()
            elif step == warmup + steps:
                synchronize(device)
                return clock() - started


def autocast_for(precision: str, device: torch.device) -> AbstractContextManager[None]:
    """The autocast context Lightning uses for ``precision``."""
    if precision not in AUTOCAST_DTYPES:
        raise UserError(
            f"trainer.precision={precision} is not one the benchmark's plain loop can mirror "
            f"({', '.join(AUTOCAST_DTYPES)}); pick one of those"
        )
    dtype = AUTOCAST_DTYPES[precision]
    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def train_tensors(datamodule: LightningDataModule, device: torch.device) -> tuple[Tensor, Tensor]:
    """The train split's inputs and targets as the model sees them, on ``device``.

    A contract data module gives them directly; a plain one's train loader is read once.
    """
    datamodule.setup("fit")
    if isinstance(datamodule, BaseDataModule):
        split = datamodule.split_tensors("train")
        return split.inputs.to(device), split.targets.to(device)
    batches = list(datamodule.train_dataloader())
    inputs = torch.cat([batch[0] for batch in batches])
    return inputs.to(device), torch.cat([batch[1] for batch in batches]).to(device)


def train_batch_size(datamodule: LightningDataModule) -> int:
    """The training batch size: the contract's setting, else the first batch's length."""
    if isinstance(datamodule, BaseDataModule):
        return int(datamodule.hparams.batch_size)
    return len(next(iter(datamodule.train_dataloader()))[0])
