"""Training progress: a live bar in a terminal, a plain line now and then in a log.

Per step the bar only counts and keeps a reference to the loss tensor. Values are read
from the device (one host sync) at refresh points only, so the bar costs next to nothing
per step and does not stall an asynchronous GPU.

Each epoch's line shows that epoch's own figures, the ones ``metrics.csv`` and the run
summary hold; its steps/s is measured as the summary's is (``training/_speed.py``).
Lightning calls callbacks' ``on_train_epoch_end`` before the LightningModule's, which logs
the epoch's training loss, so the line is written once the epoch is over: when the next
one starts or training ends. The log file gets every epoch
line, with or without the live bar.
"""

import logging
import sys
import time
from typing import IO, Any

import torch
from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ProgressBar
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from platekit.models._tasks import LOSS, TRAIN, VAL
from platekit.training._console import log_to_files
from platekit.training._speed import StepClock

log = logging.getLogger(__name__)


class ProgressDisplay(ProgressBar):
    """Loss, the task's monitored metric and steps/s while training, on global rank 0 only.

    Args:
        refresh_every: read the loss and redraw every this many steps.
        plain_interval_s: without a terminal, write a progress line at most this often
            (plus one line per epoch), so CI logs stay short.
        live: ``True`` for the rich bar, ``False`` for plain lines; ``None`` picks the bar
            when stdout is a terminal.
    """

    def __init__(
        self, refresh_every: int = 20, plain_interval_s: float = 30.0, live: bool | None = None
    ) -> None:
        super().__init__()
        self.refresh_every = max(1, refresh_every)
        self.plain_interval_s = plain_interval_s
        self.live = live
        self._enabled = True
        self._bar: Progress | None = None
        self._rerouted: list[tuple[logging.StreamHandler[Any], IO[str]]] = []
        self._task: Any = None
        # Losses since the last line, on the device: a list, folded into a sum every
        # refresh_every steps so it stays short; read (one sync) only when shown.
        self._losses: list[torch.Tensor] = []
        self._loss_sum: torch.Tensor | None = None
        self._loss_count = 0
        self._window_start = 0.0  # the live figure: steps/s since the last refresh
        self._window_first_step = 0
        self._epoch_steps = 0  # this process's batches in the epoch, for the refresh cadence
        self._batches_done = 0  # the bar's count: a resumed epoch's earlier batches too
        self._clock = StepClock()  # the epoch's steps/s, as the run summary measures it
        self._last_line = 0.0
        self._last_loss = float("nan")
        self._shown: tuple[str, ...] = ()  # the task's validation loss and monitored metric
        # The epoch whose batches are done and whose line waits for its logged figures:
        # (name, steps/s, validated), written at the next epoch's start or at the end of training.
        self._finished: tuple[str, float | None, bool] | None = None
        self._validated = False  # whether validation ran in this epoch (else val_ is stale)
        self._begun: int | None = None  # the epoch on_train_start began (a resumed one)

    # Lightning turns the bar off on ranks other than 0 through these two.
    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        task = getattr(pl_module, "task", None)
        if task is not None:
            # once each: a task monitoring its loss shows val_loss once
            self._shown = tuple(dict.fromkeys((f"{VAL}/{LOSS}", task.monitor)))
        if not self._enabled:
            return
        console = Console()
        live = self.live if self.live is not None else console.is_terminal
        if live:
            # Two columns spare: the terminal echoes Ctrl-C as "^C" after the bar's last
            # line, and a full-width line would wrap, leaving a copy of the bar behind.
            console.width = max(console.width - 2, 20)
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[stats]}"),
                console=console,
            )
            self._bar.start()
            self._rerouted = route_console_logs_through_bar()
        # A run resumed mid-epoch gets no on_train_epoch_start for that epoch: begin it here.
        self._begin_epoch(trainer)
        self._begun = trainer.current_epoch

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not self._enabled:
            return
        begun, self._begun = self._begun, None
        if begun != trainer.current_epoch:
            self._begin_epoch(trainer)

    def _begin_epoch(self, trainer: Trainer) -> None:
        """Start the epoch's clock and counts (its rate counts this process's steps only)."""
        self._write_finished(trainer)
        self._window_start = self._last_line = time.perf_counter()
        self._clock.epoch_start(trainer.global_step)
        self._window_first_step = trainer.global_step
        self._epoch_steps = self._batches_done = 0
        self._validated = False
        self._losses.clear()
        self._loss_sum, self._loss_count = None, 0
        if self._bar is not None:
            total = self.total_train_batches
            self._task = self._bar.add_task(
                self._epoch_name(trainer),
                total=total if total != float("inf") else None,
                stats="",
            )

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if not self._enabled:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            self._losses.append(loss.detach())  # no sync: read at the next refresh
        self._epoch_steps += 1
        self._batches_done = batch_idx + 1  # counts a resumed epoch's earlier batches too
        if self._epoch_steps % self.refresh_every:
            return
        self._fold_losses()
        if self._bar is not None:
            self._bar.update(self._task, completed=self._batches_done, stats=self._window(trainer))
        elif time.perf_counter() - self._last_line >= self.plain_interval_s:
            log.info(
                "%s  step %d  %s",
                self._epoch_name(trainer),
                trainer.global_step,
                self._window(trainer),
            )
            self._last_line = time.perf_counter()

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._clock.validation_start()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._clock.validation_end()
            self._validated = True

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not self._enabled:
            return
        rate = self._clock.epoch_end(trainer.global_step)
        self._read_losses()
        self._finished = (self._epoch_name(trainer), rate, self._validated)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._enabled:
            self._write_finished(trainer)
        self._stop()

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        # A stop signal after an epoch's last batch: that epoch's line is still due.
        if self._enabled:
            self._write_finished(trainer)
        self._stop()

    def _write_finished(self, trainer: Trainer) -> None:
        """The line of the epoch just finished, once; its figures are logged by now."""
        if self._finished is None:
            return
        name, rate, validated = self._finished
        self._finished = None
        metrics = trainer.callback_metrics
        # The module's epoch loss; a module that logs none gets the mean of its step losses.
        parts = [f"loss {self._metric(metrics, f'{TRAIN}/{LOSS}', self._last_loss):.4f}"]
        for shown in self._shown if validated else ():
            if shown in metrics:
                parts.append(f"{shown.replace('/', '_')} {self._metric(metrics, shown):.4f}")
        if rate is not None:
            parts.append(f"{rate:,.0f} steps/s")
        stats = "  ".join(parts)
        if self._bar is None:
            log.info("%s  %s", name, stats)
            return
        self._bar.update(self._task, completed=self._batches_done, stats=stats)
        log_to_files(log, f"{name}  {stats}")  # the bar is on the screen only

    def _stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        for handler, stream in self._rerouted:
            handler.setStream(stream)
        self._rerouted = []

    def _window(self, trainer: Trainer) -> str:
        """Loss and speed since the last refresh, last epoch's monitored metric; syncs once."""
        self._read_losses()
        now = time.perf_counter()
        rate = (trainer.global_step - self._window_first_step) / max(now - self._window_start, 1e-9)
        self._window_start, self._window_first_step = now, trainer.global_step
        text = f"loss {self._last_loss:.4f}"
        monitor = self._shown[-1] if self._shown else None
        if monitor in trainer.callback_metrics:
            value = self._metric(trainer.callback_metrics, monitor)
            text += f"  {monitor.replace('/', '_')} {value:.4f}"
        return f"{text}  {rate:,.0f} steps/s"

    def _fold_losses(self) -> None:
        """Add the pending losses to the running sum on the device, without a sync."""
        if self._losses:
            total = torch.stack(self._losses).float().sum()
            self._loss_sum = total if self._loss_sum is None else self._loss_sum + total
            self._loss_count += len(self._losses)
            self._losses.clear()

    def _read_losses(self) -> None:
        """The mean loss since the last read, copied to the host (the one sync)."""
        self._fold_losses()
        if self._loss_sum is not None:
            self._last_loss = (self._loss_sum / self._loss_count).item()
            self._loss_sum, self._loss_count = None, 0

    @staticmethod
    def _metric(metrics: dict[str, Any], name: str, default: float = float("nan")) -> float:
        value = metrics.get(name)
        return default if value is None else float(value)

    @staticmethod
    def _epoch_name(trainer: Trainer) -> str:
        """``epoch 3/14``: counted from 0 like checkpoint names, out of the last epoch."""
        last = trainer.max_epochs - 1 if trainer.max_epochs and trainer.max_epochs > 0 else "?"
        return f"epoch {trainer.current_epoch}/{last}"


def route_console_logs_through_bar() -> list[tuple[logging.StreamHandler[Any], IO[str]]]:
    """Point the log handlers that write to the terminal at the live bar's stand-ins.

    A started bar replaces ``sys.stdout``/``sys.stderr`` with proxies that print above it,
    but handlers keep the streams they were made with; a line written past the bar (a
    warning, the notice of a Ctrl-C) would leave a copy of the bar on the screen at every
    redraw. Returns each handler moved with its former stream.
    """
    targets = {id(sys.__stdout__): sys.stdout, id(sys.__stderr__): sys.stderr}
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    moved = []
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if type(handler) is logging.StreamHandler and id(handler.stream) in targets:
                moved.append((handler, handler.stream))
                handler.setStream(targets[id(handler.stream)])
    return moved
