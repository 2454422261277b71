"""Run a Hydra task as a command: one line and exit 1 for user errors."""

import functools
import gc
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError, inert
from platekit._registry import old_import
from platekit.commands._quiet import quiet_third_party
from platekit.commands._rundir import Fresh, unwritable
from platekit.config._nodes import config_dir
from platekit.config._precheck import plan, report
from platekit.config._resume import run_dir
from platekit.config._schema import problems
from platekit.config._typos import nearest_names

log = logging.getLogger(__name__)

# torch re-raises a DataLoader worker's exception with the worker's traceback as its message.
WORKER_PREFIX = "Caught UserError in DataLoader worker process"
WORKER_LINE = "UserError: "


def worker_message(message: str) -> str:
    """A UserError raised in a DataLoader worker: its own one line, not the worker traceback."""
    if not message.startswith(WORKER_PREFIX):
        return message
    lines = [line for line in message.splitlines() if WORKER_LINE in line]
    return lines[-1].split(WORKER_LINE, 1)[1] if lines else message.splitlines()[0]


Task = Callable[[DictConfig], Any]

DEBUG_ENV = "TRACEBACK"  # TRACEBACK=1 shows the full traceback of a user error


def command(config_name: str, task: Task) -> Callable[[], None]:
    """``task(cfg)`` as a console entry point reading ``configs/<config_name>.yaml`` of the
    current project (``main = command("train", train)`` in the project's ``train.py``).

    A config whose ``data`` is an empty mapping (eval, export: the checkpoint holds the data
    settings) takes ``data.<setting>=value`` as an addition to it, without Hydra's ``+``.
    """

    # hydra.run.dir of train.yaml asks this where a resumed run continues.
    OmegaConf.register_new_resolver("run_dir", run_dir, replace=True)

    def wrap(task: Task) -> Callable[[], None]:
        fresh = Fresh()  # what existed before Hydra made the run directory

        def refuse(message: str) -> NoReturn:
            log.error("error: %s", message)
            if HydraConfig.get().mode == RunMode.RUN:
                fresh.discard(Path(HydraConfig.get().runtime.output_dir))
            sys.exit(1)

        @functools.wraps(task)
        def main(cfg: DictConfig) -> Any:
            quiet_third_party()
            if found := problems(cfg):  # what a sweeper picked (the rest was checked before)
                refuse(report(found))
            try:
                return task(cfg)  # a sweeper (e.g. Optuna) reads the returned value
            except UserError as error:
                if os.environ.get(DEBUG_ENV):
                    raise
                refuse(worker_message(str(error)))
            except ModuleNotFoundError as error:
                if os.environ.get(DEBUG_ENV) or (message := old_import(error)) is None:
                    raise
                refuse(message)

        # Hydra names the job (and its log file) after the module of the function it runs,
        # found through ``__wrapped__``: a body in platekit (``commands/_export.py``) is named
        # as the command it is (``export``), not as its private module.
        if task.__module__ != "__main__":  # run as a script, Hydra reads the task's file
            del main.__wrapped__
            main.__module__ = re.sub(r"\._", ".", task.__module__)
        hydra_main: Callable[[], Any] = hydra.main(
            version_base="1.3", config_path=str(config_dir()), config_name=config_name
        )(main)

        @functools.wraps(task)
        def main_with_hints() -> None:
            if problem := run_name_problem(os.environ.get(RUN_NAME_ENV)):
                print(f"error: {problem}", flush=True)
                sys.exit(1)
            if takes_data_settings(config_name):
                sys.argv[1:] = [as_addition(arg) for arg in sys.argv[1:]]
            planned = plan(config_dir(), config_name, sys.argv[1:])
            if planned.problems:  # refused before Hydra makes a run directory
                print(f"error: {report(planned.problems)}", flush=True)
                sys.exit(1)
            if reason := unwritable(planned.run_dir):
                print(
                    f"error: cannot make the run directory {planned.run_dir}: {reason}; set "
                    "paths.root_dir (or PROJECT_ROOT) or hydra.run.dir to a writable folder",
                    flush=True,
                )
                sys.exit(1)
            if config_name == "train" and (taken := another_run(planned.run_dir, sys.argv[1:])):
                print(f"error: {taken}", flush=True)
                sys.exit(1)
            fresh.note(planned.run_dir)
            sys.argv[1:] = planned.command_line(sys.argv[1:])  # declared keys files leave out
            try:
                hydra_main()
            except SystemExit as stop:
                if stop.code not in (0, None):
                    print_hints(config_name, sys.argv[1:])
                raise
            finally:
                # The command is done: spare the exit a garbage collection over every object
                # torch and Lightning made (measured: 5.9 s of a loaded 2-core box's exit
                # after `import lightning`, 0.9 s with this; atexit handlers still run).
                gc.freeze()

        return main_with_hints

    return wrap(task)


RUN_NAME_ENV = "RUN_NAME"  # names the run directory (scripts/ give every process the same)


FOLDER_NAME = re.compile(r"[\w.-]{1,128}")  # letters and digits of any script, _ . -


def run_name_problem(name: str | None) -> str | None:
    """Why ``RUN_NAME`` cannot name a run directory under outputs/, or None if it can.

    Only a plain folder name: no separator, no ``${...}`` (Hydra would resolve it as it
    names the folder, after this check, so ``${oc.env:X}`` could name any path), no
    whitespace or control character.
    """
    if name is None or (FOLDER_NAME.fullmatch(name) and name not in (".", "..")):
        return None
    return (
        f"RUN_NAME={inert(name)!r} is not one folder name (it would name the run directory "
        "as something else, or outside outputs/); use letters, digits, '-', '_' or '.', "
        "e.g. RUN_NAME=run-1"
    )


def another_run(planned: Path | None, args: list[str]) -> str | None:
    """Why a new training run may not use ``planned``: it holds another run's checkpoints or
    results (``RUN_NAME`` reused), which it would overwrite and mix with its own."""
    resuming = any(arg.split("=", 1)[0].lstrip("+~") in ("ckpt_path",) for arg in args)
    if planned is None or resuming or not planned.is_dir():
        return None
    found = [name for name in ("checkpoints", "metrics.json") if (planned / name).exists()]
    if not found:
        return None
    return (
        f"the run directory {planned} holds another run ({', '.join(found)}); a new run "
        "there would overwrite it: pick another RUN_NAME, or resume that run with "
        f"ckpt_path={planned / 'checkpoints' / 'last.ckpt'}"
    )


def takes_data_settings(config_name: str) -> bool:
    """Whether ``configs/<config_name>.yaml`` declares ``data: {}`` for overrides."""
    path = config_dir() / f"{config_name}.yaml"
    return path.is_file() and any(
        line.strip() == "data: {}" for line in path.read_text().splitlines()
    )


def as_addition(arg: str) -> str:
    """``data.path=x`` -> ``+data.path=x``: a key added to the empty ``data`` node."""
    return f"+{arg}" if arg.startswith("data.") and "=" in arg else arg


def print_hints(config_name: str, overrides: list[str]) -> None:
    """After Hydra's own error, name the valid keys/options nearest to a mistyped one."""
    try:
        hints = nearest_names(config_dir(), config_name, overrides)
    except Exception:  # hints are a courtesy; never mask the real error
        return
    for hint in hints:
        sys.stderr.write(f"hint: {hint}\n")
