"""Sweep logging: one line per trial on the console, each trial's full log in its run dir.

Several workers share one console, so it shows the sweep's own lines (and errors) only;
training logs, Lightning's messages and Python warnings go to ``<trial dir>/train.log``.
Optuna's and alembic's INFO lines ("A new study created", "Context impl SQLiteImpl") are
dropped; their warnings reach the trial log.
"""

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna

CONSOLE_FORMAT = "%(message)s"
FILE_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] %(message)s"
# Lightning gives these loggers their own console handler when imported before logging is set up.
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning",
                     "lightning_fabric")  # fmt: skip


class SweepLines(logging.Filter):
    """Pass the sweep's own records (loggers under ``prefix``) and any error."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith(self.prefix) or record.levelno >= logging.ERROR


def setup_logging(prefix: str, log_file: Path) -> None:
    """Console and ``log_file`` (appended to by every worker) get the sweep's lines."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    for handler, fmt in (
        (logging.StreamHandler(sys.stdout), CONSOLE_FORMAT),
        (logging.FileHandler(log_file), FILE_FORMAT),
    ):
        handler.setFormatter(logging.Formatter(fmt))
        handler.addFilter(SweepLines(prefix))
        root.addHandler(handler)
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
    optuna.logging.disable_default_handler()  # its own coloured stderr handler
    optuna.logging.enable_propagation()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.captureWarnings(True)


@contextmanager
def trial_log(run_dir: Path) -> Iterator[None]:
    """Everything logged while the block runs also goes to ``<run_dir>/train.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "train.log")
    handler.setFormatter(logging.Formatter(FILE_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
