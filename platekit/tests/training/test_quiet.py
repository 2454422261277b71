"""Lightning's lines that say what the run's own header already says are dropped."""

import logging

from lightning import Trainer

from platekit.commands._quiet import LIGHTNING_LOGGERS, quiet_third_party


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
