"""Whether early stopping ended a run: at which epoch, and why, in words and as data."""

from typing import Any

from lightning import Trainer
from lightning.pytorch.callbacks import EarlyStopping

from platekit.training._summary import Row, best_row


def early_stop(trainer: Trainer, history: list[Row]) -> dict[str, Any] | None:
    """``{"epoch", "monitor", "patience", "best_epoch", "reason"}`` if early stopping ended
    the fit, else ``None``. ``epoch`` is the last epoch trained (counted from 0);
    ``best_epoch`` the best by early stopping's own metric and mode."""
    for callback in trainer.callbacks:  # type: ignore[attr-defined]  # set outside Trainer
        if isinstance(callback, EarlyStopping) and callback.stopped_epoch > 0:
            best_epoch = (best_row(history, callback.monitor, callback.mode) or {}).get("epoch")
            return {
                "epoch": callback.stopped_epoch,
                "monitor": callback.monitor,
                "patience": callback.patience,
                "best_epoch": None if best_epoch is None else int(best_epoch),
                "reason": callback.stopping_reason.name.lower(),
            }
    return None


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
