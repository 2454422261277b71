"""What the train command claims before Hydra writes into its run directory."""

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from platekit._errors import UserError
from platekit.training._run_lock import hold_run_lock
from platekit.training._signals import STOP_SIGNALS


class RunStart(Callback):
    """Hydra callback (``configs/train.yaml``) run before Hydra writes ``.hydra/``.

    Takes over SIGTERM and SIGINT for the whole process (``signals.py``) and locks the run
    directory (``run_lock.py``: one run per directory). A second run in a directory is
    refused here, so nothing of the first run is touched, its config and log included.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        STOP_SIGNALS.install()
        claim(Path(config.hydra.run.dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        STOP_SIGNALS.install()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        # A sweep's jobs get directories of their own, made just now; a single run's
        # directory is locked already.
        claim(Path(config.hydra.runtime.output_dir))


def claim(run_dir: Path) -> None:
    """Lock ``run_dir``, or print why not and exit 1 (Hydra turns a callback's exceptions
    into warnings, and its job logging, which writes into the directory, is not set up)."""
    try:
        hold_run_lock(run_dir)
    except UserError as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(1) from None
