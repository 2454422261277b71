"""Run a Hydra task as a command: one line and exit 1 for user errors."""

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import hydra
from omegaconf import DictConfig

from .config import config_dir
from .errors import UserError

log = logging.getLogger(__name__)

Task = Callable[[DictConfig], Any]

DEBUG_ENV = "TRACEBACK"  # TRACEBACK=1 shows the full traceback of a user error


def command(config_name: str) -> Callable[[Task], Callable[[], None]]:
    """Turn ``task(cfg)`` into a console entry point reading ``configs/<config_name>.yaml``."""

    def wrap(task: Task) -> Callable[[], None]:
        @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)
        @functools.wraps(task)
        def main(cfg: DictConfig) -> Any:
            try:
                return task(cfg)  # a sweeper (e.g. Optuna) reads the returned value
            except UserError as error:
                if os.environ.get(DEBUG_ENV):
                    raise
                log.error("error: %s", error)
                sys.exit(1)

        return main

    return wrap
