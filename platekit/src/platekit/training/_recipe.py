"""The building blocks of a project's train recipe, in the order it calls them.

A project's ``train.py`` reads top to bottom::

    run = TrainRun.start(cfg, overrides)             # checks, resume point, threads, seed
    datamodule, model, info = build_parts(cfg)       # data set up, model sized for it
    trainer = run.trainer(cfg, datamodule, model, info, callbacks)
    with run.fitting():                              # requeue, failures, signals
        trainer.fit(model, datamodule=datamodule, ckpt_path=run.ckpt_path)
    if not run.fitted(trainer):                      # stopped by a signal: last.ckpt saved
        return run.stopped(trainer)
    with run.testing(trainer, model):                # the model as shipped: float32
        results = trainer.test(model, datamodule=datamodule, ckpt_path=run.best(trainer))
    return run.finish(trainer, results)              # metrics.json, plots, summary

Nothing is written before ``trainer``: a bad config, checkpoint or data module stops the
run with one line and no run directory.
"""

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig
from torch import Tensor

from platekit._errors import UserError
from platekit._files import write_json
from platekit._registry import active, trust
from platekit.checkpoints._card import DATA_KEY, MODEL_KEY, DescribeCheckpoint
from platekit.checkpoints._integrity import SEALED
from platekit.checkpoints._io import hand_over, load_checkpoint, load_weights
from platekit.checkpoints._restore import Checkpoint, check_names, check_rows
from platekit.checkpoints._run_record import keep_recorded_settings, record, say_precision_change
from platekit.checkpoints._run_settings import (
    command_line_overrides,
    keep_model,
    keep_run_settings,
    override_key,
    refuse_ignored_callback_settings,
    refuse_ignored_optimizer_settings,
)
from platekit.config._resume import resume_path
from platekit.config._rules import CHECKPOINT, flag, null_or, text
from platekit.config._schema import declare
from platekit.config._threads import CHECKPOINT_KEY as THREADS_KEY
from platekit.config._threads import Threads, apply_threads, available_cores, choose_threads
from platekit.data._adapters import warn_if_plain
from platekit.data._base import SPLITS
from platekit.data._info import DataInfo
from platekit.models._class_counts import per_class
from platekit.models._tasks import Task, task_of
from platekit.training._caveats import headline_caveat
from platekit.training._clock import run_origin
from platekit.training._console import log_config, log_file_names
from platekit.training._header import run_header
from platekit.training._hints import explain_failures
from platekit.training._history import MetricHistory
from platekit.training._plots import write_plots
from platekit.training._signals import StopAfterStep, stopped_by_signal
from platekit.training._slurm import arm_requeue, requeue_if_asked
from platekit.training._speed import TrainSpeed
from platekit.training._stopping import StayStopped, early_stop, epochs_trained, stop_message
from platekit.training._summary import best_row, objective, summarize, summary_table
from platekit.training._trainer import (
    SHIPPED_PRECISION,
    as_floats,
    as_shipped,
    build_parts,
    build_trainer,
    data_overrides,
    distributed_sampler,
    prepare_run,
    test_precision,
)

log = logging.getLogger(__name__)

declare(
    {
        "ckpt_path": CHECKPOINT,
        "init_from": CHECKPOINT,
        "init_strict": flag(),
        "new_data": flag(),
        "optimized_metric": null_or(text("monitor")),
    }
)

__all__ = ["Checkpoint", "EvalRun", "TrainRun", "build_parts", "build_trainer"]


@dataclass
class TrainRun:
    """One training run's state between the recipe's steps."""

    cfg: DictConfig
    threads: Threads
    ckpt_path: Path | None = None
    resumed: dict[str, Any] | None = None
    init_from: dict[str, Any] | None = None
    origin: float = field(default_factory=time.perf_counter)  # what wall time counts from
    started: float = field(default_factory=time.perf_counter)  # the recipe's first line
    fit_started: float | None = None
    speed: TrainSpeed = field(default_factory=TrainSpeed)
    run_dir: Path = Path()
    task: Task | None = None
    history: MetricHistory = field(default_factory=MetricHistory)
    precision: str = ""  # what it trained at (it tests at the shipped model's, float32)
    class_names: tuple[str, ...] = ()
    fit_seconds: float = 0.0
    epochs: list[dict[str, Any]] = field(default_factory=list)  # the history fit ended with
    stop: dict[str, Any] | None = None  # early stopping's, if it ended fit
    interrupted: bool = False  # a signal stopped fit (last.ckpt was saved)

    @classmethod
    def start(cls, cfg: DictConfig, overrides: Sequence[str] | None = None) -> "TrainRun":
        """Check where the run starts (``ckpt_path``, ``init_from``), set threads and seed.

        Args:
            overrides: the settings given explicitly (a resumed run refuses those that would
                change its data split); by default the command line's.
        """
        started = time.perf_counter()
        origin = run_origin()  # the process's start, for the first run in a process
        trust(cfg.get("trusted_classes"))  # classes a model or checkpoint may name
        ckpt_path, resumed, init_from = starting_point(cfg)
        if resumed is not None:
            explicit = command_line_overrides() if overrides is None else overrides
            keep_run_settings(cfg, resumed, explicit, str(ckpt_path))
            keep_model(cfg, resumed, explicit, str(ckpt_path))
            refuse_ignored_optimizer_settings(cfg, resumed, explicit, str(ckpt_path))
            refuse_ignored_callback_settings(resumed, explicit, str(ckpt_path))
            given = {override_key(override) for override in explicit}
            keep_recorded_settings(cfg, resumed, given, str(ckpt_path))
        threads = choose_threads(
            cfg.get("threads"),
            cfg.trainer.get("devices"),
            cfg.trainer.get("accelerator"),
            resumed=stored_threads(resumed),
        )
        apply_threads(threads)  # results differ in the last bits between thread counts
        seed_everything(cfg.seed, workers=True, verbose=False)  # the initial weights depend on it
        return cls(cfg, threads, ckpt_path, resumed, init_from, origin, started)

    def trainer(
        self,
        cfg: DictConfig,
        datamodule: LightningDataModule,
        model: LightningModule,
        info: DataInfo,
        callbacks: Sequence[Callback] = (),
    ) -> Trainer:
        """Load the starting weights, make the run directory, build the trainer, show the header.

        ``callbacks`` join the configured ones (a sweep adds its pruning callback).
        """
        if self.resumed is not None and self.ckpt_path is not None:  # fit restores the rest
            check_rows(self.resumed.get(DATA_KEY) or {}, datamodule, SPLITS, self.ckpt_path)
            load_weights(model, self.resumed, self.ckpt_path)
        if self.init_from is not None:
            initialise(model, self.init_from, cfg.init_from, strict=cfg.init_strict)
        self.run_dir = prepare_run(cfg)  # only now, with everything checked, is anything written
        log_config(cfg)  # to train.log; the screen gets the header below
        warn_if_plain(datamodule)
        self.task = task_of(model)
        self.class_names = tuple(info.class_names or ())
        describe = DescribeCheckpoint(info, record(cfg))
        extra = [self.history, self.speed, describe, StopAfterStep(), StayStopped(), *callbacks]
        trainer = build_trainer(
            cfg,
            callbacks=extra,
            resumed=self.resumed,
            task=self.task,
            use_distributed_sampler=distributed_sampler(datamodule),
            announce_precision=False,
        )
        self.precision = str(trainer.precision)
        if self.resumed is not None:
            say_precision_change(self.resumed, self.precision, str(self.ckpt_path))
        if trainer.is_global_zero:
            header = run_header(
                data_name=type(datamodule).__name__,
                info=info,
                task=self.task,
                model=model,
                trainer=trainer,
                threads=self.threads,
                precision_setting=str(cfg.trainer.precision),
                seed=cfg.seed,
                run_dir=self.run_dir,
                log_name=(log_file_names() or ["the log file"])[0],
            )
            log.info("%s", "\n".join(header))
            if self.resumed is not None:  # in place of Lightning's "Restoring states from ..."
                log.info(
                    "resumes %s (epoch %s, step %s)",
                    self.ckpt_path,
                    self.resumed.get("epoch", "?"),
                    self.resumed.get("global_step", "?"),
                )
        if self.resumed is not None and self.ckpt_path is not None:  # fit reads the one loaded
            hand_over(trainer, self.ckpt_path, self.resumed)
        return trainer

    @contextmanager
    def fitting(self) -> Iterator[None]:
        """Around ``trainer.fit``: SLURM requeue armed, known failures explained in one line,
        and a stop by a signal (SIGTERM, Ctrl-C: ``last.ckpt`` is saved) caught, which
        ``interrupted`` then says."""
        fit_started = self.fit_started = time.perf_counter()
        arm_requeue()  # SLURM: near the time limit, stop as on SIGTERM, then requeue
        try:
            with explain_failures(self.cfg):
                yield
        except SIGTERMException:  # SIGTERM or Ctrl-C (training/_signals.py): last.ckpt saved
            requeue_if_asked()  # a SLURM pre-emption notice (SIGUSR1) requeues the job
            self.interrupted = True
            return
        self.fit_seconds = time.perf_counter() - fit_started

    def fitted(self, trainer: Trainer) -> bool:
        """After ``trainer.fit``: False if a signal stopped it; else the epochs and the
        early stop are read (testing a checkpoint restores its shorter history)."""
        if self.interrupted:
            return False
        self.epochs = list(self.history.epochs)
        self.stop = early_stop(trainer, self.epochs)
        if self.stop is not None and trainer.is_global_zero:
            log.info("%s", stop_message(self.stop, trainer.max_epochs))
        return True

    def stopped(self, trainer: Trainer) -> dict[str, Any]:
        """What a run stopped by a signal reports: where ``last.ckpt`` is, how to continue."""
        return stopped_by_signal(trainer, self.run_dir)

    def best(self, trainer: Trainer) -> str | None:
        """The best checkpoint, to test; None (the weights in memory) without one."""
        checkpoint = trainer.checkpoint_callback
        return (
            checkpoint.best_model_path if isinstance(checkpoint, ModelCheckpoint) else ""
        ) or None

    @contextmanager
    def testing(self, trainer: Trainer, model: LightningModule) -> Iterator[None]:
        """Around ``trainer.test``: the model as shipped (float32 weights and inputs, whatever
        precision trained it), known failures explained in one line."""
        with explain_failures(self.cfg), as_shipped(trainer, model):
            yield

    def finish(self, trainer: Trainer, results: list[Mapping[str, float]]) -> dict[str, Any]:
        """Write ``metrics.json``, then the plots; log the summary; return the metrics.

        Every test figure (``test/*``, the per-class table, the confusion plot) comes from
        the one test pass of the best checkpoint, in float32 as the shipped model computes.
        """
        assert self.task is not None  # set by trainer()
        epochs, stop = self.epochs, self.stop  # as fit ended, before the test's restore
        model = trainer.lightning_module
        tested = self.best(trainer)
        best_epoch = tested_epoch(model, tested, epochs, self.task)
        metrics: dict[str, Any] = {
            "test": as_floats(results[0]),
            "best_checkpoint": tested,
            "epochs": epochs_trained(trainer),
            "steps": trainer.global_step,
            "fit_seconds": round(self.fit_seconds, 3),
            "precision": self.precision,
            "test_precision": SHIPPED_PRECISION,
            "world_size": trainer.world_size,
            "run_dir": str(self.run_dir),
        }
        metrics |= summarize(
            epochs,
            self.speed.clock,
            wall_seconds=time.perf_counter() - self.origin,
            startup_seconds=(self.fit_started or self.started) - self.origin,
            imports_seconds=self.started - self.origin,
            monitor=self.task.monitor,
            mode=self.task.mode,
            best_epoch=best_epoch,
        )
        metrics["early_stop"] = stop
        confusion = test_confusion(model, metrics, self.class_names)
        if trainer.is_global_zero:
            write_json(self.run_dir / "metrics.json", metrics)  # first: a plot may fail
            plot_safely(
                self.run_dir / "plots",
                epochs,
                self.task,
                confusion,
                best_epoch=best_epoch,
                stopped_epoch=stop["epoch"] if stop else None,
                class_names=self.class_names,
            )
            report(self.run_dir, metrics)
        return metrics

    @staticmethod
    def score(metrics: dict[str, Any], cfg: DictConfig) -> float | None:
        """``cfg.optimized_metric`` of a run's metrics (if set), for a sweeper such as Optuna.

        ``optimized_metric=monitor`` is the task's monitored metric, signed so larger is better.
        """
        name = cfg.get("optimized_metric")
        return objective(metrics, name) if name and "test" in metrics else None


def tested_epoch(
    model: LightningModule, tested: str | None, epochs: list[dict[str, Any]], task: Task
) -> float | None:
    """The epoch of the checkpoint the test loaded; the history's best without one."""
    loaded = getattr(model, "loaded_epoch", None)
    if tested and isinstance(loaded, int):
        return float(loaded)
    return (best_row(epochs, task.monitor, task.mode) or {}).get("epoch")


def test_confusion(
    model: LightningModule, metrics: dict[str, Any], class_names: Sequence[str]
) -> Tensor | None:
    """The test pass's confusion counts; their per-class table and caveat added to ``metrics``."""
    confusion = getattr(model, "test_confusion", None)
    if not isinstance(confusion, Tensor):
        return None
    names = list(class_names) or [str(i) for i in range(len(confusion))]
    metrics["per_class"] = per_class(confusion, names)
    caveat = headline_caveat(confusion, names)
    if caveat is not None:
        metrics["caveats"] = [caveat]
    return confusion


def class_names_of(trainer: Trainer) -> list[str]:
    """The class names of the data module the trainer tested on; none if it has none."""
    datamodule = getattr(trainer, "datamodule", None)
    info = getattr(datamodule, "info", None)
    names = (
        info.class_names if isinstance(info, DataInfo) else getattr(datamodule, "class_names", None)
    )
    return [str(name) for name in names or ()]


def plot_safely(plot_dir: Path, *args: Any, **kwargs: Any) -> None:
    """``write_plots``; a plot that fails is one warning, not a lost run (metrics.json stands)."""
    try:
        write_plots(plot_dir, *args, **kwargs)
    except Exception as error:  # matplotlib raises many kinds
        first = next((line for line in str(error).splitlines() if line.strip()), "")
        log.warning(
            "plots not written (%s: %s); metrics.json is complete", type(error).__name__, first
        )


def starting_point(
    cfg: DictConfig,
) -> tuple[Path | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The checkpoint to resume from (path and content) and the one to take weights from.

    Both are loaded (and verified) here, so a bad file stops the run with one line before
    its run directory is touched; their weights are checked against the model once it is
    built for the data.
    """
    ckpt_path = resume_path(cfg)
    if ckpt_path is not None and cfg.get("init_from"):
        raise UserError(
            "ckpt_path and init_from are both set; ckpt_path resumes a run, init_from "
            "starts a new one from its weights: set only one"
        )
    if ckpt_path is not None:
        resumed = load_checkpoint(ckpt_path)
        if DATA_KEY in resumed and MODEL_KEY in resumed:  # what it names must be buildable
            check_names(resumed, active(), ckpt_path)
        return ckpt_path, resumed, None
    if not cfg.get("init_from"):
        return None, None, None
    return None, None, load_checkpoint(cfg.init_from)


def stored_threads(checkpoint: dict[str, Any] | None) -> int | None:
    """The thread count a resumed checkpoint was trained with: only from one this project
    sealed, and at most the cores this process may use (None otherwise)."""
    if not checkpoint or not checkpoint.get(SEALED):
        return None
    value = checkpoint.get(THREADS_KEY)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return None
    return min(value, available_cores())


def initialise(model: LightningModule, checkpoint: dict[str, Any], path: str, strict: bool) -> None:
    """Start from a checkpoint's weights only (fine-tuning); optimizer and counters are new."""
    unfit = load_weights(model, checkpoint, path, strict=strict)
    log.info("initialised weights from %s", path)
    for kind, keys in unfit.items():
        if keys:
            log.warning("init_from: %d %s keys left as initialised: %s", len(keys), kind, keys)


def report(run_dir: Path, metrics: dict[str, Any]) -> None:
    """Log the summary table and where the run's results are."""
    log.info("%s", summary_table(metrics, run_dir))
    log.info("run directory:   %s", run_dir)
    log.info("best checkpoint: %s", metrics["best_checkpoint"])
    log.info("metrics:         %s", run_dir / "metrics.json")
    log.info("plots:           %s", run_dir / "plots")
    for caveat in metrics.get("caveats", []):
        log.warning("%s", caveat)


@dataclass
class EvalRun:
    """One evaluation of a checkpoint: what eval's recipe puts around ``trainer.test``."""

    cfg: DictConfig
    checkpoint: Checkpoint
    model: LightningModule
    run_dir: Path

    @classmethod
    def start(cls, cfg: DictConfig) -> "EvalRun":
        """``cfg.ckpt_path`` opened and verified (every class it names checked), its model
        rebuilt from its own hyperparameters with its weights, the seed set, the config saved."""
        trust(cfg.get("trusted_classes"))
        if not cfg.get("ckpt_path"):
            raise UserError(
                f"ckpt_path is not set; run e.g. `{cfg.task_name} ckpt_path=path/to/last.ckpt`"
            )
        checkpoint = Checkpoint.open(cfg.ckpt_path)
        model = checkpoint.model()
        return cls(cfg, checkpoint, model, prepare_run(cfg))

    def datamodule(self) -> LightningDataModule:
        """The rows the checkpoint was trained on (refused if they changed), or every row of
        new data with ``new_data=true``; ``data.<setting>=`` overrides one of its settings."""
        return self.checkpoint.datamodule(data_overrides(self.cfg), new_rows=self.cfg.new_data)

    def trainer(self) -> Trainer:
        """The trainer that tests: in float32, as the shipped model computes, unless
        ``trainer.precision`` is given on the command line (its figures then say so)."""
        given = {override_key(override) for override in command_line_overrides()}
        precision = test_precision(self.cfg, given)
        return build_trainer(self.cfg, precision=precision, announce_precision=False)

    def finish(self, trainer: Trainer, results: list[Mapping[str, float]]) -> dict[str, Any]:
        """Write ``metrics.json`` and log the scores; return the metrics."""
        metrics: dict[str, Any] = {
            "test": as_floats(results[0]),
            "checkpoint": str(Path(self.cfg.ckpt_path).resolve()),
            "precision": str(trainer.precision),
        }
        confusion = test_confusion(trainer.lightning_module, metrics, class_names_of(trainer))
        if trainer.is_global_zero:
            write_json(self.run_dir / "metrics.json", metrics)
            scores = "  ".join(f"{name} {value:.4f}" for name, value in metrics["test"].items())
            label = (
                "float32, as model.onnx and predict compute"
                if metrics["precision"] == SHIPPED_PRECISION
                else f"{metrics['precision']} as asked; model.onnx and predict compute in float32"
            )
            log.info("%s on %s (%s)", scores, self.cfg.ckpt_path, label)
            if confusion is not None:
                log.info(
                    "per class: precision, recall and support in %s", self.run_dir / "metrics.json"
                )
            for caveat in metrics.get("caveats", []):
                log.warning("%s", caveat)
            log.info("metrics: %s", self.run_dir / "metrics.json")
        return metrics
