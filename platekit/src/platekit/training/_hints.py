"""Turn the failures people hit most into one line that says what to change.

``with explain_failures(cfg): trainer.fit(...)`` re-raises a recognised error as a
``UserError`` (the original stays chained, and ``TRACEBACK=1`` shows it); anything else
passes through untouched.
"""

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from omegaconf import DictConfig

from platekit._errors import UserError, first_line

Hint = Callable[[BaseException, DictConfig], str | None]


def out_of_memory(error: BaseException, cfg: DictConfig) -> str | None:
    if not (
        isinstance(error, torch.OutOfMemoryError)
        or re.search(r"out of memory|can't allocate memory", str(error), re.IGNORECASE)
    ):
        return None
    batch = cfg.data.get("batch_size")
    accumulate = cfg.trainer.get("accumulate_grad_batches") or 1
    fix = "lower data.batch_size or raise trainer.accumulate_grad_batches"
    if isinstance(batch, int) and batch > 1:
        fix = (
            f"lower data.batch_size, e.g. data.batch_size={batch // 2} "
            f"trainer.accumulate_grad_batches={accumulate * 2} keeps the effective batch"
        )
    return (
        f"out of memory with data.batch_size={batch} and "
        f"trainer.accumulate_grad_batches={accumulate} ({first_line(error)}); {fix}, "
        "or use a smaller model"
    )


SHAPE_PATTERNS = re.compile(
    r"shapes cannot be multiplied|size mismatch|is invalid for input of size|"
    r"Expected input batch_size|expected input\[.*\] to have|"
    r"must match the size of tensor|Expected .*D.* input",
    re.IGNORECASE,
)


def shape_mismatch(error: BaseException, cfg: DictConfig) -> str | None:
    text = str(error)
    if isinstance(error, IndexError) and "out of bounds" in text:
        return (
            f"a label is outside the classes the model scores ({first_line(error)}); give "
            "every class index a name in the data module's class_names, and leave "
            "model.task.num_classes unset (it follows the data)"
        )
    if not (isinstance(error, RuntimeError) and SHAPE_PATTERNS.search(text)):
        return None
    return (
        f"shape mismatch between the data and model.net ({first_line(error)}); make the "
        f"net's sizes ({net_settings(cfg)}) match the data's inputs, or pick a model built "
        "for this data"
    )


def net_settings(cfg: DictConfig) -> str:
    """The configured net's settings as keys (``model.net.channels, ...``), or a generic pair."""
    generic = "e.g. model.net.in_features, model.net.in_channels"
    try:
        from platekit._registry import active
        from platekit.models._build import FROM_DATA
        from platekit.settings import settings_of

        net = active().resolve(cfg.model.net._target_, "net", "model.net")
    except Exception:  # a hint names what it can
        return generic
    names = [name for name in settings_of(net).named if name not in FROM_DATA]
    return ", ".join(f"model.net.{name}" for name in names) or generic


DEVICE_PATTERNS = re.compile(
    r"Expected all tensors to be on the same device|is not on the expected device|"
    r"weight type \(torch\.cuda"
)


def device_mismatch(error: BaseException, cfg: DictConfig) -> str | None:
    if not DEVICE_PATTERNS.search(str(error)):
        return None
    return (
        f"tensors on different devices with trainer.accelerator={cfg.trainer.get('accelerator')} "
        f"({first_line(error)}); create tensors inside the model with device=x.device, "
        "or register them with self.register_buffer so Lightning moves them; do not call "
        ".cuda() or .to() in the model or data yourself"
    )


def dataloader_workers(error: BaseException, cfg: DictConfig) -> str | None:
    text = str(error)
    if not re.search(
        r"DataLoader worker|shared memory|Too many open files|can't start new thread", text
    ):
        return None
    return (
        f"data loader workers could not start or died with "
        f"data.num_workers={cfg.data.get('num_workers')} ({first_line(error)}); set "
        "data.num_workers=0 to load in the main process, or give the machine more shared "
        "memory (docker: --shm-size=2g) and open files (ulimit -n)"
    )


def monitor_never_logged(error: BaseException, cfg: DictConfig) -> str | None:
    """Early stopping's metric was not logged when it checked: no validation ran before the
    fit ended (``trainer.max_steps`` shorter than an epoch) or the model never logs it."""
    match = re.search(
        r"Early stopping conditioned on metric `([^`]+)` which is not available", str(error)
    )
    if match is None:
        return None
    return (
        f"early stopping watches {match.group(1)}, which had not been logged when it checked "
        f"(trainer.max_steps={cfg.trainer.get('max_steps', -1)} can end the fit before the "
        "first validation); let a validation run first, or set callbacks.early_stopping=null"
    )


HINTS: tuple[Hint, ...] = (
    out_of_memory,
    device_mismatch,
    dataloader_workers,
    shape_mismatch,
    monitor_never_logged,
)


def hint_for(error: BaseException, cfg: DictConfig) -> str | None:
    """The one-line explanation of ``error``, or ``None`` if it is not a known failure."""
    for hint in HINTS:
        if message := hint(error, cfg):
            return message
    return None


@contextmanager
def explain_failures(cfg: DictConfig) -> Iterator[None]:
    """Re-raise known failures of training or testing as a ``UserError`` with the fix."""
    try:
        yield
    except (RuntimeError, IndexError, OSError) as error:
        message = hint_for(error, cfg)
        if message is None:
            raise
        raise UserError(message) from error
