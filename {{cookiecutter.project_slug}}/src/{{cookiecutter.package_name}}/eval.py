"""Evaluate a checkpoint on the test split of the run that wrote it.

python -m <package>.eval ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt
python -m <package>.eval ckpt_path=... data.path=/new/place/table.csv   # the data moved
python -m <package>.eval ckpt_path=... data.path=new_rows.csv new_data=true   # other rows

The checkpoint names its data module and settings; ``data.<setting>=`` overrides one.
"""

from typing import Any

from omegaconf import DictConfig
from platekit.commands import command
from platekit.training import EvalRun


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Test ``cfg.ckpt_path`` with the data split the checkpoint was trained on."""
    run = EvalRun.start(cfg)  # verified, every class checked; its model rebuilt, weights loaded
    datamodule = run.datamodule()  # the rows it was trained on (refused if they changed)
    trainer = run.trainer()  # float32, as the shipped model computes
    results = trainer.test(run.model, datamodule=datamodule, verbose=False)
    return run.finish(trainer, results)  # metrics.json, the scores logged


main = command("eval", evaluate)

if __name__ == "__main__":
    main()
