"""Lightning and torch messages that do not apply to this project, dropped one by one.

Each entry names a message exactly and why it does not apply here; anything else, a
real warning included, still shows. Messages the project can avoid at their source are
avoided there instead (see the README's "What a run prints").
"""

import logging
import warnings

# Lightning's informational lines (logger ``lightning.pytorch.utilities.rank_zero``),
# by how they start.
LIGHTNING_INFO = (
    "GPU available:",  # the run header names the device used
    "TPU available:",
    "HPU available:",
    "💡 Tip:",
    # the run header's device line and eval's precision line name the precision
    "Using bfloat16 Automatic Mixed Precision (AMP)",
    "Using 16bit Automatic Mixed Precision (AMP)",  # advertisements for Lightning's cloud services
    # the schedules ask for the number of steps; the loader is built for it, once
    "Loading `train_dataloader` to estimate number of stepping batches.",
    # printed before the last epoch's line, which says the same (epoch 14/14)
    "`Trainer.fit` stopped: `max_epochs=",
    # a resume says which checkpoint it continues after the header, the summary which one
    # it tested (best checkpoint), eval's result line which one it evaluated
    "Restoring states from the checkpoint path at ",
    "Restored all states from the checkpoint at ",
    "Loaded model weights from the checkpoint at ",
)
LIGHTNING_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
)


class DropLines(logging.Filter):
    """Drop records whose message starts with one of ``prefixes``."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


def quiet_third_party() -> None:
    """Install the filters (idempotent); the entry points call this first."""
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, DropLines) for existing in logger.filters):
            logger.addFilter(DropLines(LIGHTNING_INFO))
    # Lightning's own utilities/_pytree.py calls a torch API deprecated in torch 2.13; the
    # project does not (fixed in Lightning, not here).
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
    # An epoch shorter than log_every_n_steps: Lightning warns that steps would be logged
    # rarely, but it counts the interval over the run (its `_batches_that_stepped`), not
    # within an epoch, and so does the task's grad-norm logging: a step is still logged
    # every log_every_n_steps steps, whatever the epoch's length.
    warnings.filterwarnings(
        "ignore",
        message=r"The number of training batches \(\d+\) is smaller than the logging interval",
    )
