"""Lightning callbacks this project adds to the stock ones."""

from .checkpoint import PreemptibleCheckpoint
from .exact_resume import ExactResume
from .finite_loss import FiniteLoss

__all__ = ["ExactResume", "FiniteLoss", "PreemptibleCheckpoint"]
