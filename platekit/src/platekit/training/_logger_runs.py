"""One training run is one run in the tracker, across pre-emptions and resumes.

CSV and TensorBoard continue on their own: they write into the run directory, which a
resumed run keeps. W&B and MLflow start a new run unless told the old one's id, so
``LoggerRuns`` stores those ids in every checkpoint (``checkpoint["logger_runs"]``, e.g.
``{"mlflow": "3f2a..."}``) and ``continue_logger_runs`` puts them back into the logger
configs before a resumed run builds its loggers.

MLflow continues the same run (its metric steps are the trainer's global step, so they
carry on). W&B offline (0.31) writes each part to its own ``offline-run-*-<id>`` folder
under one run id; ``wandb sync --id <id> <run>/wandb/offline-run-*`` uploads the parts, in
order of start time, into one run (see the README's Loggers section).
"""

import re
from typing import Any

from hydra.utils import get_class
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import Logger, MLFlowLogger, WandbLogger
from omegaconf import DictConfig, OmegaConf

KEY = "logger_runs"
RUN_ID = re.compile(r"[\w.-]{1,128}")  # a tracker's run id; anything else is not continued
# Each tracker: its logger class and the constructor argument that names a run to continue.
TRACKERS: dict[str, tuple[type[Logger], str]] = {
    "wandb": (WandbLogger, "id"),
    "mlflow": (MLFlowLogger, "run_id"),
}


def run_ids(loggers: list[Logger]) -> dict[str, str]:
    """The run id of each tracker logger in ``loggers``, e.g. ``{"wandb": "k3x9..."}``."""
    found = {}
    for logger in loggers:
        if isinstance(logger, WandbLogger) and logger.version:
            found["wandb"] = str(logger.version)
        elif isinstance(logger, MLFlowLogger) and logger.run_id:
            found["mlflow"] = str(logger.run_id)
    return found


class LoggerRuns(Callback):
    """Write the trackers' run ids into every checkpoint, for ``continue_logger_runs``."""

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if ids := run_ids(trainer.loggers):
            checkpoint[KEY] = ids


def tracker_of(node: Any) -> str | None:
    """``"wandb"`` or ``"mlflow"`` for a logger config building one of them, else ``None``."""
    target = node.get("_target_") if OmegaConf.is_dict(node) else None
    if not isinstance(target, str):
        return None
    try:
        built = get_class(target)
    except (ImportError, ValueError):
        return None  # not a class Hydra can find: instantiating it will say so
    for tracker, (kind, _) in TRACKERS.items():
        if isinstance(built, type) and issubclass(built, kind):
            return tracker
    return None


def continue_logger_runs(
    loggers: DictConfig | None, checkpoint: dict[str, Any] | None
) -> DictConfig | None:
    """``loggers`` (the ``logger`` config group) set to continue the checkpoint's runs.

    A copy is returned; ``loggers`` is left as it is. A run id the user set in the config
    wins over the checkpoint's; a tracker the checkpoint has no id for starts a new run.
    """
    stored = (checkpoint or {}).get(KEY) or {}
    if not loggers or not stored:
        return loggers
    continued = loggers.copy()
    for name, node in continued.items():
        tracker = tracker_of(node)
        if tracker is None or tracker not in stored:
            continue
        argument = TRACKERS[tracker][1]
        if node.get(argument) is None and RUN_ID.fullmatch(str(stored[tracker])):
            OmegaConf.update(continued, f"{name!s}.{argument}", stored[tracker], force_add=True)
    return continued
