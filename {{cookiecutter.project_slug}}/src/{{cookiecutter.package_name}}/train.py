"""Train a model, then test its best checkpoint.

python -m <package>.train                       # defaults from configs/train.yaml
python -m <package>.train model=mlp trainer.max_epochs=5 seed=1
"""

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .utils.entry import command
from .utils.files import write_json
from .utils.run import as_floats, build_parts, build_trainer, prepare_run

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, test the best checkpoint, write ``metrics.json``; return what it holds."""
    run_dir = prepare_run(cfg)
    datamodule, model = build_parts(cfg)
    trainer = build_trainer(cfg)

    started = time.perf_counter()
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    fit_seconds = time.perf_counter() - started

    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint else ""
    # With no checkpoint (e.g. fast_dev_run) the weights in memory are tested.
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
    if trainer.is_global_zero:
        write_json(run_dir / "metrics.json", metrics)
        report(run_dir, metrics)
    return metrics


def report(run_dir: Path, metrics: dict[str, Any]) -> None:
    """Log where the run's results are."""
    test = metrics["test"]
    log.info(
        "test accuracy %.4f, loss %.4f",
        test.get("test/acc", float("nan")),
        test.get("test/loss", float("nan")),
    )
    log.info("run directory:   %s", run_dir)
    log.info("best checkpoint: %s", metrics["best_checkpoint"])
    log.info("metrics:         %s", run_dir / "metrics.json")


main = command("train")(train)

if __name__ == "__main__":
    main()
