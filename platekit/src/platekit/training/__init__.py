"""Training: the pieces a project's ``train.py`` puts around ``trainer.fit`` and
``trainer.test`` (checks, resume point, threads, seed, the trainer, reports), and the
callbacks and logger the shipped configs name.

Names are imported on first use: a command that needs one light module of this layer (the
run lock, the signals) does not import torch and Lightning through this file.
"""

from typing import TYPE_CHECKING

from platekit._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them, imported eagerly
    from platekit.training._checkpointing import PreemptibleCheckpoint as PreemptibleCheckpoint
    from platekit.training._csv_logger import ResumableCSVLogger as ResumableCSVLogger
    from platekit.training._exact_resume import ExactResume as ExactResume
    from platekit.training._finite_loss import FiniteLoss as FiniteLoss
    from platekit.training._progress import ProgressDisplay as ProgressDisplay
    from platekit.training._recipe import EvalRun as EvalRun
    from platekit.training._recipe import TrainRun as TrainRun
    from platekit.training._recipe import build_parts as build_parts
    from platekit.training._recipe import build_trainer as build_trainer
    from platekit.training._run_start import RunStart as RunStart

EXPORTS = {
    "EvalRun": "._recipe",
    "TrainRun": "._recipe",
    "build_parts": "._recipe",
    "build_trainer": "._recipe",
    "ExactResume": "._exact_resume",
    "FiniteLoss": "._finite_loss",
    "PreemptibleCheckpoint": "._checkpointing",
    "ProgressDisplay": "._progress",
    "ResumableCSVLogger": "._csv_logger",
    "RunStart": "._run_start",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
