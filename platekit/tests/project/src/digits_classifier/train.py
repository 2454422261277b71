"""Train a model, then test its best checkpoint.

python -m <package>.train                       # defaults from configs/train.yaml
python -m <package>.train model=mlp trainer.max_epochs=5 seed=1
python -m <package>.train ckpt_path=last        # resume the newest run of this task
python -m <package>.train ckpt_path=last trainer.max_epochs=25   # train 10 more epochs
python -m <package>.train init_from=path/to.ckpt optimizer.lr=0.0003   # fine-tune
"""

from collections.abc import Sequence
from typing import Any

from lightning import Callback
from omegaconf import DictConfig
from platekit.commands import command
from platekit.training import TrainRun, build_parts


def train(
    cfg: DictConfig, overrides: Sequence[str] | None = None, callbacks: Sequence[Callback] = ()
) -> dict[str, Any]:
    """Fit, test the best checkpoint, write ``metrics.json``; return what it holds.

    Args:
        overrides: the settings given explicitly (a resumed run refuses those that would
            change its data split); by default the command line's.
        callbacks: join the configured ones (a sweep adds its pruning callback).
    """
    run = TrainRun.start(cfg, overrides)  # resume point, threads, seed: nothing written yet
    datamodule, model, info = build_parts(cfg)  # the data set up, the model sized for it
    trainer = run.trainer(cfg, datamodule, model, info, callbacks)  # run dir, header
    with run.fitting():  # SLURM requeue, known failures explained, a signal caught
        trainer.fit(model, datamodule=datamodule, ckpt_path=run.ckpt_path)
    if not run.fitted(trainer):  # a signal stopped it: last.ckpt is saved
        return run.stopped(trainer)
    with run.testing(trainer, model):  # the model as shipped: float32, whatever trained it
        results = trainer.test(model, datamodule=datamodule, ckpt_path=run.best(trainer))
    return run.finish(trainer, results)  # metrics.json, plots, the summary table


def train_and_score(cfg: DictConfig) -> float | None:
    """Train; return ``cfg.optimized_metric`` (if set) for a sweeper such as Optuna."""
    return TrainRun.score(train(cfg), cfg)


main = command("train", train_and_score)

if __name__ == "__main__":
    main()
