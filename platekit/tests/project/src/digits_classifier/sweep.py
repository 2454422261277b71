"""Search hyperparameters with Optuna: parallel workers on one shared, resumable study.

python -m <package>.sweep sweep.workers=2 sweep.n_trials=40   (see configs/hparams_search/)

The sweep's body is platekit's (`platekit.commands.sweep`); each trial runs this project's
train recipe (`train.py`).
"""

from platekit.commands import sweep

from . import PROJECT  # noqa: F401  (sets the project whose train recipe trials run)

if __name__ == "__main__":
    sweep()
