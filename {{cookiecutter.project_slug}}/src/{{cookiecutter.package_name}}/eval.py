"""Evaluate a checkpoint on the test split of the run that wrote it.

python -m <package>.eval ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt
python -m <package>.eval ckpt_path=... data.path=/new/place/table.csv   # the data moved
python -m <package>.eval ckpt_path=... data.path=new_rows.csv new_data=true   # other rows

The checkpoint names its data module and settings; ``data.<setting>=`` overrides one.
"""

from typing import Any

from omegaconf import DictConfig
from platekit.commands import command
from platekit.training import (
    build_tester,
    data_overrides,
    open_checkpoint,
    prepare_run,
    report_test,
)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Test ``cfg.ckpt_path`` with the data split the checkpoint was trained on."""
    checkpoint = open_checkpoint(cfg)  # verified; every class it names checked
    model = checkpoint.model()  # rebuilt from its own hyperparameters, weights loaded
    run_dir = prepare_run(cfg)
    # the rows it was trained on (refused if they changed), or every row of new data
    datamodule = checkpoint.datamodule(data_overrides(cfg), new_rows=cfg.new_data)
    trainer = build_tester(cfg)
    results = trainer.test(model, datamodule=datamodule, verbose=False)
    return report_test(cfg, trainer, results, run_dir)


main = command("eval", evaluate)

if __name__ == "__main__":
    main()
