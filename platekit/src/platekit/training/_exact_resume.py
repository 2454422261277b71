"""Make a resumed run bitwise equal to one that was never stopped.

Lightning checkpoints the weights, optimizer, schedulers and loop counters, but not the
random number generators (dropout draws from them) nor how far through its epoch the
sampler got. This callback adds both, and marks a validation that a stop cut short as one
to run again in full.
"""

import logging
from typing import Any

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn

from platekit.checkpoints._rng import RNGState, capture_rng, check_rng, restore_rng

CHECKPOINT_KEY = "rng_states"
# Where Lightning (2.6) keeps the validation's batch counters in a checkpoint.
VALIDATION_PROGRESS = ("loops", "fit_loop", "epoch_loop.val_loop.batch_progress")

log = logging.getLogger(__name__)


class ExactResume(Callback):
    """Save the RNG states in every checkpoint; count the batches the sampler handed out.

    The sampler's own state (epoch, batches consumed) travels with the data module's state;
    this callback keeps its consumed count true, since loaders prefetch ahead of training.
    """

    def __init__(self) -> None:
        self._rng_to_restore: RNGState | None = None

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        sampler = getattr(trainer.train_dataloader, "sampler", None)
        mark_consumed = getattr(sampler, "mark_consumed", None)
        if mark_consumed is not None:
            mark_consumed(batch_idx + 1)

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[CHECKPOINT_KEY] = capture_rng()
        if validation_cut_short(trainer):
            validate_again(checkpoint)

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        stored = checkpoint.get(CHECKPOINT_KEY)
        self._rng_to_restore = None if stored is None else check_rng(stored)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # As late as possible: model building and the sanity check ran since the load.
        if self._rng_to_restore is not None:
            restore_rng(self._rng_to_restore)
            self._rng_to_restore = None
        warn_if_epoch_is_cut_short(trainer)


def validation_cut_short(trainer: Trainer) -> bool:
    """Whether fit is saving in the middle of a validation (a stop signal, training/_signals.py)."""
    return (
        trainer.state.fn == TrainerFn.FITTING
        and trainer.validating
        and not trainer.sanity_checking
        and not trainer.fit_loop.epoch_loop.val_loop.batch_progress.is_last_batch
    )


def validate_again(checkpoint: dict[str, Any]) -> None:
    """Record a validation cut short as started with no batch done, so a resume runs it
    again in full (Lightning's restart "mid-evaluation").

    Its metrics so far are not in a checkpoint: left as they were, the counters made the
    resume skip the rest, and that epoch had no validation (no ``val/*`` row, no best
    checkpoint or early-stopping check).
    """
    progress: Any = checkpoint
    for key in VALIDATION_PROGRESS:
        progress = progress.get(key) if isinstance(progress, dict) else None
    if not isinstance(progress, dict) or "current" not in progress or "total" not in progress:
        return
    before = progress["total"]["completed"] - progress["current"]["completed"]
    progress["total"] = {"ready": before + 1, "started": before + 1}
    progress["total"] |= {"processed": before, "completed": before}
    progress["current"] = {"ready": 1, "started": 1, "processed": 0, "completed": 0}
    progress["is_last_batch"] = False


def warn_if_epoch_is_cut_short(trainer: Trainer) -> None:
    """Say so when Lightning resumes past an epoch the checkpoint had not finished.

    That happens after a ``trainer.max_steps`` stop in the middle of an epoch: Lightning
    counts the epoch as done and starts the next, so the rest of it is never trained on.
    """
    sampler = getattr(trainer.train_dataloader, "sampler", None)
    skip, epoch = getattr(sampler, "skip", 0), getattr(sampler, "epoch", 0)
    if skip and epoch < trainer.current_epoch:
        log.warning(
            "the checkpoint stopped %d batches into epoch %d (a trainer.max_steps stop?); "
            "Lightning resumes at epoch %d, so the rest of epoch %d is skipped. For an "
            "exact continuation stop on max_epochs, or resume from a step checkpoint",
            skip,
            epoch,
            trainer.current_epoch,
            epoch,
        )
