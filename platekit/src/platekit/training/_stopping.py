"""Whether early stopping ended a run: at which epoch, and why, in words and as data."""

import logging
from typing import Any

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import EarlyStopping

from platekit.training._summary import Row, best_row

log = logging.getLogger(__name__)


def early_stop(trainer: Trainer, history: list[Row]) -> dict[str, Any] | None:
    """``{"epoch", "monitor", "patience", "best_epoch", "reason"}`` if early stopping ended
    the fit, else ``None``. ``epoch`` is the last epoch trained (counted from 0);
    ``best_epoch`` the best by early stopping's own metric and mode."""
    for callback in trainer.callbacks:  # type: ignore[attr-defined]  # set outside Trainer
        if isinstance(callback, EarlyStopping) and has_stopped(callback):
            best_epoch = (best_row(history, callback.monitor, callback.mode) or {}).get("epoch")
            return {
                "epoch": callback.stopped_epoch,
                "monitor": callback.monitor,
                "patience": callback.patience,
                "best_epoch": None if best_epoch is None else int(best_epoch),
                "reason": callback.stopping_reason.name.lower(),
            }
    return None


def has_stopped(callback: EarlyStopping) -> bool:
    """Whether early stopping has ended the run (in this process, or in the checkpoint's)."""
    return callback.stopped_epoch > 0


class StayStopped(Callback):
    """A resumed run that early stopping had ended stays ended: fit trains nothing more.

    Lightning restores early stopping's state but not the stop itself, so a resume (a
    requeue script's ``ckpt_path=last`` on a finished run) trained one more epoch, and one
    more on each call, rewriting ``last.ckpt``. Asked to stop before its loop starts, fit
    skips it as it skips a run that reached ``max_epochs``; the run is tested again as it
    stands. (Callback states are restored before ``on_fit_start``; a strategy that restores
    them later is caught at ``on_train_start``, one hook later.)
    """

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._stop_if_stopped(trainer)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._stop_if_stopped(trainer)

    @staticmethod
    def _stop_if_stopped(trainer: Trainer) -> None:
        callbacks = trainer.callbacks  # type: ignore[attr-defined]  # set outside Trainer
        stopped = [c for c in callbacks if isinstance(c, EarlyStopping) and has_stopped(c)]
        if stopped and not trainer.should_stop:
            trainer.should_stop = True
            if trainer.is_global_zero:
                log.info(
                    "early stopping had ended this run after epoch %d: nothing more to train "
                    "(init_from=<checkpoint> starts a new run from its weights)",
                    stopped[0].stopped_epoch,
                )


def epochs_trained(trainer: Trainer) -> int:
    """The epochs fit has run, counting one that ended the run: ``current_epoch`` lags one
    behind when fit skipped its loop for a resumed run that had stopped early."""
    processed = getattr(trainer.fit_loop.epoch_progress.current, "processed", 0)  # typed wider
    return max(trainer.current_epoch, processed)


def stop_message(stop: dict[str, Any], max_epochs: int | None) -> str:
    """``early stopping: stopped after epoch 10/14; <monitor> has not improved ...``, one line.

    Epochs are counted from 0, out of the last planned one, as on the progress lines.
    """
    planned = f"/{max_epochs - 1}" if max_epochs and max_epochs > 0 else ""
    if stop["reason"] == "patience_exhausted":
        why = (
            f"{stop['monitor']} has not improved for {stop['patience']} validations, "
            f"since epoch {stop['best_epoch']}"
        )
    else:  # a threshold or a non-finite value (Lightning's EarlyStoppingReason)
        why = f"{stop['monitor']}: {stop['reason'].replace('_', ' ')}"
    return f"early stopping: stopped after epoch {stop['epoch']}{planned}; {why}"
