"""Train a model, then test its best checkpoint.

python -m <package>.train                       # defaults from configs/train.yaml
python -m <package>.train model=mlp trainer.max_epochs=5 seed=1
"""

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .callbacks.confusion import TestConfusionMatrix
from .callbacks.history import MetricHistory
from .utils.console import log_config
from .utils.entry import command
from .utils.files import write_json
from .utils.hints import explain_failures
from .utils.plots import write_plots
from .utils.run import as_floats, build_parts, build_trainer, prepare_run
from .utils.summary import objective, summarize, summary_table

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, test the best checkpoint, write ``metrics.json``; return what it holds."""
    started = time.perf_counter()
    run_dir = prepare_run(cfg)
    log_config(cfg)
    datamodule, model = build_parts(cfg)
    history, confusion = MetricHistory(), TestConfusionMatrix(cfg.model.num_classes)
    trainer = build_trainer(cfg, callbacks=[history, confusion])

    fit_started = time.perf_counter()
    with explain_failures(cfg):
        trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    fit_seconds = time.perf_counter() - fit_started
    epochs = list(history.epochs)  # testing a checkpoint restores the history saved in it

    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint else ""
    # With no checkpoint (e.g. fast_dev_run) the weights in memory are tested.
    with explain_failures(cfg):
        results = trainer.test(model, datamodule=datamodule, ckpt_path=best or None, verbose=False)

    metrics = {
        "test": as_floats(results[0]),
        "best_checkpoint": best or None,
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "fit_seconds": round(fit_seconds, 3),
        "run_dir": str(run_dir),
    }
    monitor = getattr(checkpoint, "monitor", None) or "val/acc"
    mode = getattr(checkpoint, "mode", "max")
    wall_seconds = time.perf_counter() - started
    metrics |= summarize(epochs, trainer.global_step, fit_seconds, wall_seconds, monitor, mode)
    if trainer.is_global_zero:
        write_plots(run_dir / "plots", epochs, confusion.matrix)
        write_json(run_dir / "metrics.json", metrics)
        report(run_dir, metrics)
    return metrics


def report(run_dir: Path, metrics: dict[str, Any]) -> None:
    """Log the summary table and where the run's results are."""
    log.info("%s", summary_table(metrics, run_dir))
    log.info("run directory:   %s", run_dir)
    log.info("best checkpoint: %s", metrics["best_checkpoint"])
    log.info("metrics:         %s", run_dir / "metrics.json")
    log.info("plots:           %s", run_dir / "plots")


def train_and_score(cfg: DictConfig) -> float | None:
    """Train; return ``cfg.optimized_metric`` (if set) for a sweeper such as Optuna."""
    metrics = train(cfg)
    name = cfg.get("optimized_metric")
    return objective(metrics, name) if name else None


main = command("train")(train_and_score)

if __name__ == "__main__":
    main()
