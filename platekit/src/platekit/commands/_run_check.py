"""Check a command's config as Hydra composed it, before Hydra makes its run directory.

``@hydra.main`` creates the run directory, ``.hydra/`` and the log file before the task runs,
and a resumed run's directory is the finished run's own. ``CheckRun``, a Hydra callback
(``configs/hydra/default.yaml``), runs in between: a refused run creates nothing, so nothing
has to be deleted and a finished run's files stay as they were. It checks the config Hydra
composed; no second composition is made.

Until then Hydra raises the errors it meets while composing (``HYDRA_FULL_ERROR``, its
documented switch) instead of printing them in several lines, so that the entry point says
each in one line; from the first callback on, Hydra reports the task's errors its own way.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from platekit.commands._rundir import Fresh, unwritable
from platekit.config._check import report, run_directory, run_problems

FULL_ERROR = "HYDRA_FULL_ERROR"
FRESH = Fresh()  # what existed around the run directory before Hydra made it
# "raised": FULL_ERROR set by this process; "checked": a single run's config passed.
STATE: set[str] = set()


@contextmanager
def composition_errors_raised() -> Iterator[None]:
    """Hydra raises what it meets while composing, until ``composed`` is called."""
    if os.environ.get(FULL_ERROR) is None:
        os.environ[FULL_ERROR] = "1"
        STATE.add("raised")
    try:
        yield
    finally:
        composed()


def composed() -> None:
    """The config is composed: Hydra reports errors as it would without us."""
    if "raised" in STATE:
        STATE.discard("raised")
        os.environ.pop(FULL_ERROR, None)


def refuse(message: str) -> NoReturn:
    """One ``error:`` line (or report) and exit 1: Hydra passes a SystemExit through."""
    print(f"error: {message}", flush=True)
    raise SystemExit(1)


class CheckRun(Callback):
    """Refuse a run whose config breaks its rules, before Hydra writes anything."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        if found := run_problems(config):
            refuse(report(found))
        run_dir = run_directory(config)
        if reason := unwritable(run_dir):
            refuse(
                f"cannot make the run directory {run_dir}: {reason}; set paths.root_dir "
                "(or PROJECT_ROOT) or hydra.run.dir to a writable folder"
            )
        if kwargs.get("config_name") == "train" and (taken := another_run(run_dir, config)):
            refuse(taken)
        FRESH.note(run_dir)
        STATE.add("checked")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        if found := run_problems(config, multirun=True):
            refuse(report(found))


def another_run(run_dir: Path | None, cfg: DictConfig) -> str | None:
    """Why a new training run may not use ``run_dir``: it holds another run's checkpoints or
    results (``RUN_NAME`` reused), which it would overwrite and mix with its own."""
    resuming = OmegaConf.select(cfg, "ckpt_path", default=None) is not None
    if run_dir is None or resuming or not run_dir.is_dir():
        return None
    found = [name for name in ("checkpoints", "metrics.json") if (run_dir / name).exists()]
    if not found:
        return None
    return (
        f"the run directory {run_dir} holds another run ({', '.join(found)}); a new run "
        "there would overwrite it: pick another RUN_NAME, or resume that run with "
        f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}"
    )


def checked() -> bool:
    """Whether this process's single run had its config checked by ``CheckRun``."""
    return "checked" in STATE
