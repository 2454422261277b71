"""Lightning's lines that say what the run's own header already says, or that do not apply
to the run, are dropped."""

import logging
import re
import warnings
from pathlib import Path

import pytest
from lightning import LightningModule, Trainer

from platekit.commands._quiet import LIGHTNING_LOGGERS, quiet_third_party
from platekit.training import PreemptibleCheckpoint
from platekit.training._checkpointing import NOT_EMPTY


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_mixed_precision_notice_is_dropped() -> None:
    """On a CPU with bfloat16, precision=auto is bf16-mixed: Lightning's "Using bfloat16
    Automatic Mixed Precision (AMP)" came before the header that names the precision."""
    quiet_third_party()
    lines = Lines()
    logger = logging.getLogger(LIGHTNING_LOGGERS[0])
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        Trainer(accelerator="cpu", precision="bf16-mixed", logger=False, enable_checkpointing=False)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    assert not [m for m in lines.messages if "Automatic Mixed Precision" in m], lines.messages


@pytest.mark.parametrize("continues_run", [False, True])
def test_a_full_checkpoint_directory_warns_a_new_run_only(
    tmp_path: Path, continues_run: bool
) -> None:
    """Lightning's own warning (its words, which ``NOT_EMPTY`` matches) for a new run; none
    for a resumed run, which continues in its own directory."""
    (tmp_path / "epoch_000.ckpt").touch()
    checkpoint = PreemptibleCheckpoint(dirpath=str(tmp_path))
    checkpoint.continues_run = continues_run
    trainer = Trainer(accelerator="cpu", logger=False, callbacks=[checkpoint])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint.setup(trainer, LightningModule(), "fit")
    said = [str(w.message) for w in caught if "exists and is not empty" in str(w.message)]
    assert said == (
        [] if continues_run else [f"Checkpoint directory {tmp_path} exists and is not empty."]
    )
    assert all(re.fullmatch(NOT_EMPTY, line) for line in said)
