"""Training: the pieces a project's ``train.py`` puts around ``trainer.fit`` and
``trainer.test`` (checks, resume point, threads, seed, the trainer, reports), and the
callbacks and logger the shipped configs name."""

from platekit.training._checkpointing import PreemptibleCheckpoint
from platekit.training._csv_logger import ResumableCSVLogger
from platekit.training._exact_resume import ExactResume
from platekit.training._finite_loss import FiniteLoss
from platekit.training._progress import ProgressDisplay
from platekit.training._recipe import (
    TrainRun,
    build_parts,
    build_tester,
    build_trainer,
    data_overrides,
    open_checkpoint,
    prepare_run,
    report_test,
    score,
)
from platekit.training._run_start import RunStart

__all__ = [
    "ExactResume",
    "FiniteLoss",
    "PreemptibleCheckpoint",
    "ProgressDisplay",
    "ResumableCSVLogger",
    "RunStart",
    "TrainRun",
    "build_parts",
    "build_tester",
    "build_trainer",
    "data_overrides",
    "open_checkpoint",
    "prepare_run",
    "report_test",
    "score",
]
