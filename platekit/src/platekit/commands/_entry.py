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
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError, inert
from platekit._registry import old_import
from platekit.commands._quiet import quiet_third_party
from platekit.commands._run_check import (
    FRESH,
    FULL_ERROR,
    STATE,
    checked,
    composed,
    composition_errors_raised,
    nearest,
)
from platekit.config._check import addition, report
from platekit.config._nodes import config_dir
from platekit.config._resume import run_dir
from platekit.config._schema import problems

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
        """``task`` as Hydra's main: refused (one ``error:`` line, exit 1, a fresh run
        directory removed) on a config CheckRun did not check, a sweeper's bad pick, or the
        task's own ``UserError``."""

        def refuse(message: str) -> NoReturn:
            log.error("error: %s", message)
            if HydraConfig.get().mode == RunMode.RUN:
                for handler in logging.getLogger().handlers:
                    handler.flush()  # the log is cut back to its length before this run
                FRESH.undo(Path(HydraConfig.get().runtime.output_dir))
            sys.exit(1)

        @functools.wraps(task)
        def main(cfg: DictConfig) -> Any:
            composed()  # a config without the CheckRun callback
            quiet_third_party()
            if HydraConfig.get().mode == RunMode.RUN and not checked():
                refuse(
                    "configs/hydra/default.yaml names no CheckRun callback, which checks the "
                    "config before the run directory is made; add it under hydra's "
                    "callbacks: check: {_target_: platekit.commands.CheckRun}"
                )
            if found := problems(cfg):  # what a sweeper picked (a single run's was checked)
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
            try:
                run_hydra(hydra_main, config_name)
            finally:
                # The command is done: spare the exit a garbage collection over every object
                # torch and Lightning made (measured: 5.9 s of a loaded 2-core box's exit
                # after `import lightning`, 0.9 s with this; atexit handlers still run).
                gc.freeze()

        return main_with_hints

    return wrap(task)


def run_hydra(hydra_main: Callable[[], Any], config_name: str) -> None:
    """Run ``hydra_main`` on ``sys.argv``; what Hydra cannot compose is said in one line.

    An override Hydra refuses because the config files leave its key out, where the key
    lies in a component (``data.noise=0.1``), is given again as ``+data.noise=0.1``: the
    component's class then takes it or refuses it by name (``commands/_run_check.py``).
    """
    if {"-sc", "--shell-completion"} & set(sys.argv):  # its answers go where Hydra puts them
        hydra_main()
        return
    user_wants_traceback = os.environ.get(FULL_ERROR) == "1"
    for _ in range(len(sys.argv)):
        try:
            with composition_errors_raised():
                hydra_main()
            return
        except HydraException as error:
            overrides = sys.argv[1:]
            index = addition(error, overrides)
            if index is None:
                if user_wants_traceback:
                    raise
                for line in mistakes(error, config_name, overrides):
                    print(f"error: {line}", flush=True)
                sys.exit(1)
            STATE.added.append(overrides[index])
            sys.argv[index + 1] = f"+{overrides[index]}"
            GlobalHydra.instance().clear()


def mistakes(error: HydraException, config_name: str, overrides: list[str]) -> list[str]:
    """A line per override Hydra could not compose, naming the nearest valid names; else
    Hydra's own message in one line."""
    # A malformed override: Hydra says how.
    hints = [] if isinstance(error, OverrideParseException) else nearest(config_name, overrides)
    if hints:
        return hints
    causes = [str(error), str(error.__cause__ or "")]
    return [" ".join(line.strip() for c in causes for line in c.splitlines() if line.strip())]


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


def takes_data_settings(config_name: str) -> bool:
    """Whether ``configs/<config_name>.yaml`` declares ``data: {}`` for overrides."""
    path = config_dir() / f"{config_name}.yaml"
    return path.is_file() and any(
        line.strip() == "data: {}" for line in path.read_text().splitlines()
    )


def as_addition(arg: str) -> str:
    """``data.path=x`` -> ``+data.path=x``: a key added to the empty ``data`` node."""
    return f"+{arg}" if arg.startswith("data.") and "=" in arg else arg
