"""Evaluate a checkpoint on the test split of the run that wrote it.

python -m <package>.eval ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt
python -m <package>.eval ckpt_path=... data.path=/new/place/table.csv   # the data moved

The checkpoint names its data module and settings; ``data.<setting>=`` overrides one.
"""

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .checkpoints.registry import trust
from .checkpoints.restore import Checkpoint
from .cli.entry import command
from .cli.errors import UserError
from .runtime.files import write_json
from .runtime.run import as_floats, build_trainer, data_overrides, prepare_run

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Test ``cfg.ckpt_path`` with the data split the checkpoint was trained on."""
    trust(cfg.get("trusted_classes"))  # classes a model or checkpoint may name
    if not cfg.get("ckpt_path"):
        raise UserError("ckpt_path is not set; run e.g. `eval ckpt_path=path/to/last.ckpt`")
    checkpoint = Checkpoint.open(cfg.ckpt_path)
    model = checkpoint.model()
    run_dir = prepare_run(cfg)
    datamodule = checkpoint.datamodule(
        data_overrides(cfg), roots=[cfg.paths.root_dir]
    )  # the run's own test split
    trainer = build_trainer(cfg)
    results = trainer.test(model, datamodule=datamodule, verbose=False)
    metrics: dict[str, Any] = {
        "test": as_floats(results[0]),
        "checkpoint": str(Path(cfg.ckpt_path).resolve()),
    }
    if trainer.is_global_zero:
        write_json(run_dir / "metrics.json", metrics)
        scores = "  ".join(f"{name} {value:.4f}" for name, value in metrics["test"].items())
        log.info("%s on %s", scores, cfg.ckpt_path)
        log.info("metrics: %s", run_dir / "metrics.json")
    return metrics


main = command("eval")(evaluate)

if __name__ == "__main__":
    main()
