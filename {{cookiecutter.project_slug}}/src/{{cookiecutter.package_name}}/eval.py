"""Evaluate a checkpoint on the test split of the run that wrote it.

python -m <package>.eval ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt
"""

import logging
from pathlib import Path
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig

from .checkpoints.io import load_checkpoint, restore_datamodule, restore_model
from .cli.entry import command
from .cli.errors import UserError
from .runtime.files import write_json
from .runtime.run import as_floats, build_trainer, prepare_run

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Test ``cfg.ckpt_path`` with the data split the checkpoint was trained on."""
    if not cfg.get("ckpt_path"):
        raise UserError("ckpt_path is not set; run e.g. `eval ckpt_path=path/to/last.ckpt`")
    checkpoint = load_checkpoint(cfg.ckpt_path)
    model = restore_model(get_class(cfg.model._target_), checkpoint, cfg.ckpt_path)
    run_dir = prepare_run(cfg)
    datamodule = restore_datamodule(cfg.data, checkpoint)  # the run's own test split
    trainer = build_trainer(cfg)
    results = trainer.test(model, datamodule=datamodule, verbose=False)
    metrics = {"test": as_floats(results[0]), "checkpoint": str(Path(cfg.ckpt_path).resolve())}
    if trainer.is_global_zero:
        write_json(run_dir / "metrics.json", metrics)
        log.info("test accuracy %.4f on %s", metrics["test"]["test/acc"], cfg.ckpt_path)
        log.info("metrics: %s", run_dir / "metrics.json")
    return metrics


main = command("eval")(evaluate)

if __name__ == "__main__":
    main()
