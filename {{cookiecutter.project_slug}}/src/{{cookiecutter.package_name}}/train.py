"""Train a model, then test its best checkpoint.

python -m <package>.train                       # defaults from configs/train.yaml
python -m <package>.train model=mlp trainer.max_epochs=5 seed=1
python -m <package>.train ckpt_path=last        # resume the newest run of this task
python -m <package>.train ckpt_path=last trainer.max_epochs=25   # train 10 more epochs
python -m <package>.train init_from=path/to.ckpt optimizer.lr=0.0003   # fine-tune
"""

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning import Callback, LightningModule, seed_everything
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from .callbacks.confusion import TestConfusionMatrix
from .callbacks.history import MetricHistory
from .checkpoints.card import DATA_KEY, MODEL_KEY, DescribeCheckpoint
from .checkpoints.io import hand_over, load_checkpoint, load_weights
from .checkpoints.registry import active, trust
from .checkpoints.restore import check_names
from .checkpoints.resume import resume_path
from .checkpoints.run_settings import command_line_overrides, keep_run_settings
from .cli.console import log_config, log_file_names
from .cli.entry import command
from .cli.errors import UserError
from .cli.header import run_header
from .cli.hints import explain_failures
from .data.adapters import warn_if_plain
from .models.tasks import task_of
from .reporting.plots import write_plots
from .reporting.stopping import early_stop, stop_message
from .reporting.summary import best_row, objective, summarize, summary_table
from .runtime.files import write_json
from .runtime.run import as_floats, build_parts, build_trainer, distributed_sampler, prepare_run
from .runtime.signals import StopAfterStep, stopped_by_signal
from .runtime.slurm import arm_requeue, requeue_if_asked
from .runtime.threads import apply_threads, choose_threads

log = logging.getLogger(__name__)


def train(
    cfg: DictConfig, overrides: Sequence[str] | None = None, callbacks: Sequence[Callback] = ()
) -> dict[str, Any]:
    """Fit, test the best checkpoint, write ``metrics.json``; return what it holds.

    Args:
        overrides: the settings given explicitly (a resumed run refuses those that would
            change its data split); by default the command line's.
        callbacks: join the configured ones (a sweep adds its pruning callback).
    """
    trust(cfg.get("trusted_classes"))  # classes a model or checkpoint may name
    started = time.perf_counter()
    ckpt_path, resumed, init_from = starting_point(cfg)  # checked before anything is written
    if resumed is not None:
        explicit = command_line_overrides() if overrides is None else overrides
        keep_run_settings(cfg, resumed, explicit, str(ckpt_path))
    threads = choose_threads(cfg.get("threads"), cfg.trainer.get("devices"))
    apply_threads(threads)  # results differ in the last bits between thread counts
    seed_everything(cfg.seed, workers=True, verbose=False)  # the initial weights depend on it
    datamodule, model, info = build_parts(cfg)
    if resumed is not None and ckpt_path is not None:  # the weights must fit; fit restores them
        load_weights(model, resumed, ckpt_path)
    if init_from is not None:
        initialise(model, init_from, cfg.init_from, strict=cfg.init_strict)
    run_dir = prepare_run(cfg)  # only now, with everything checked, is anything written
    log_config(cfg)  # to train.log; the screen gets the header below
    warn_if_plain(datamodule)
    history = MetricHistory()
    extra = [history, DescribeCheckpoint(info), StopAfterStep(), *callbacks]
    confusion = TestConfusionMatrix(info.num_classes) if info.num_classes else None
    task = task_of(model)
    trainer = build_trainer(
        cfg,
        callbacks=extra + ([confusion] if confusion else []),
        resumed=resumed,
        task=task,
        use_distributed_sampler=distributed_sampler(datamodule),
        announce_precision=False,
    )
    if trainer.is_global_zero:
        header = run_header(
            data_name=type(datamodule).__name__,
            info=info,
            task=task,
            model=model,
            trainer=trainer,
            threads=threads,
            precision_setting=str(cfg.trainer.precision),
            seed=cfg.seed,
            run_dir=run_dir,
            log_name=(log_file_names() or ["the log file"])[0],
        )
        log.info("%s", "\n".join(header))
    if resumed is not None and ckpt_path is not None:  # fit reads the one loaded above
        hand_over(trainer, ckpt_path, resumed)

    fit_started = time.perf_counter()
    arm_requeue()  # SLURM: near the time limit, stop as on SIGTERM, then requeue
    try:
        with explain_failures(cfg):
            trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
    except SIGTERMException:  # SIGTERM or Ctrl-C (runtime/signals.py): last.ckpt was saved
        requeue_if_asked()  # a SLURM pre-emption notice (SIGUSR1) puts the job back in the queue
        return stopped_by_signal(trainer, run_dir)
    fit_seconds = time.perf_counter() - fit_started
    epochs = list(history.epochs)  # testing a checkpoint restores the history saved in it
    best_epoch = (best_row(epochs, task.monitor, task.mode) or {}).get("epoch")
    stop = early_stop(trainer, epochs)
    if stop is not None and trainer.is_global_zero:
        log.info("%s", stop_message(stop, trainer.max_epochs))

    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if isinstance(checkpoint, ModelCheckpoint) else ""
    # With no checkpoint (e.g. fast_dev_run) the weights in memory are tested.
    with explain_failures(cfg):
        results = trainer.test(model, datamodule=datamodule, ckpt_path=best or None, verbose=False)

    metrics = {
        "test": as_floats(results[0]),
        "best_checkpoint": best or None,
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "fit_seconds": round(fit_seconds, 3),
        "precision": trainer.precision,
        "world_size": trainer.world_size,
        "run_dir": str(run_dir),
    }
    wall_seconds = time.perf_counter() - started
    steps = trainer.global_step
    metrics |= summarize(epochs, steps, fit_seconds, wall_seconds, task.monitor, task.mode)
    metrics["early_stop"] = stop
    if trainer.is_global_zero:
        write_plots(
            run_dir / "plots",
            epochs,
            task,
            confusion.matrix if confusion else None,
            best_epoch=best_epoch,
            stopped_epoch=stop["epoch"] if stop else None,
        )
        write_json(run_dir / "metrics.json", metrics)
        report(run_dir, metrics)
    return metrics


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


def train_and_score(cfg: DictConfig) -> float | None:
    """Train; return ``cfg.optimized_metric`` (if set) for a sweeper such as Optuna.

    ``optimized_metric=monitor`` is the task's monitored metric, signed so larger is better.
    """
    metrics = train(cfg)
    name = cfg.get("optimized_metric")
    return objective(metrics, name) if name else None


main = command("train")(train_and_score)

if __name__ == "__main__":
    main()
