"""Check a command's config as Hydra composed it, before Hydra makes its run directory.

``@hydra.main`` creates the run directory, ``.hydra/`` and the log file before the task runs,
and a resumed run's directory is the finished run's own. ``CheckRun``, a Hydra callback
(``configs/hydra/default.yaml``), runs in between: a refused run creates nothing, so nothing
has to be deleted and a finished run's files stay as they were. It checks the config Hydra
composed; no second composition is made for a command line without a mistake.

Until then Hydra raises the errors it meets while composing (``HYDRA_FULL_ERROR``, its
documented switch) instead of printing them in several lines, so that the entry point says
each in one line; from the first callback on, Hydra reports the task's errors its own way.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from platekit.commands._rundir import Fresh, unwritable
from platekit.config._check import report, run_directory, run_problems
from platekit.config._nodes import config_dir
from platekit.config._schema import components, owner_of
from platekit.config._trainer import trainer_argument
from platekit.config._typos import has_key, nearest_names

FULL_ERROR = "HYDRA_FULL_ERROR"
FRESH = Fresh()  # what existed around the run directory before Hydra made it


@dataclass
class State:
    """This process's command: what the entry point changed, and whether CheckRun ran."""

    full_error: str | None = None  # FULL_ERROR as the user set it, while ours is in place
    raising: bool = False
    added: list[str] = field(default_factory=list)  # overrides given again with `+`
    checked: bool = False


STATE = State()


@contextmanager
def composition_errors_raised() -> Iterator[None]:
    """Hydra raises what it meets while composing, until ``composed`` is called."""
    STATE.full_error, STATE.raising = os.environ.get(FULL_ERROR), True
    os.environ[FULL_ERROR] = "1"
    try:
        yield
    finally:
        composed()


def composed() -> None:
    """The config is composed: Hydra reports errors as the user's environment asks."""
    if STATE.raising:
        STATE.raising = False
        if STATE.full_error is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = STATE.full_error


def checked() -> bool:
    """Whether this process's single run had its config checked by ``CheckRun``."""
    return STATE.checked


def refuse(message: str) -> NoReturn:
    """One ``error:`` line (or report) and exit 1: Hydra passes a SystemExit through."""
    print(f"error: {message}", flush=True)
    raise SystemExit(1)


class CheckRun(Callback):
    """Refuse a run whose config breaks its rules, before Hydra writes anything."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        refuse_additions_outside_components(config, kwargs.get("config_name"))
        if found := run_problems(config):
            refuse(report(found))
        run_dir = run_directory(config)
        refuse_unwritable(run_dir, "hydra.run.dir")
        if kwargs.get("config_name") == "train" and (taken := another_run(run_dir, config)):
            refuse(taken)
        FRESH.note(run_dir)
        STATE.checked = True

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        refuse_additions_outside_components(config, kwargs.get("config_name"))
        refuse_unknown_sweeps(config, kwargs.get("config_name"))
        if found := run_problems(config, multirun=True):
            refuse(report(found))
        refuse_unwritable(Path(str(config.hydra.sweep.dir)), "hydra.sweep.dir")


def refuse_unwritable(directory: Path | None, key: str) -> None:
    if reason := unwritable(directory):
        refuse(
            f"cannot make the run directory {directory}: {reason}; set paths.root_dir "
            f"(or PROJECT_ROOT) or {key} to a writable folder"
        )


def refuse_additions_outside_components(cfg: DictConfig, config_name: str | None) -> None:
    """An override the entry point gave again with ``+`` must lie in a component this
    config builds (whose class then takes or refuses it); else it is a mistyped key."""
    if not STATE.added:
        return
    found, _ = components(cfg)
    strays = [
        line
        for line in STATE.added
        if owner_of(key := line.split("=", 1)[0], found) is None and not trainer_argument(key)
    ]
    if strays:
        refuse_with_hints(config_name, strays)


def refuse_unknown_sweeps(cfg: DictConfig, config_name: str | None) -> None:
    """A multirun's swept key or group option that does not exist, before the sweep's
    folder is made (Hydra applies the sweeps only in each job)."""
    folder = config_dir()
    unknown = []
    for override in OverridesParser.create().parse_overrides(list(cfg.hydra.overrides.task)):
        if not override.is_sweep_override() or override.is_add() or override.is_delete():
            continue
        key = override.key_or_group
        values = [str(value) for value in override.sweep_string_iterator()]
        if (folder / key).is_dir():  # a config group: each value names one of its files
            missing = [v for v in values if not (folder / key / f"{v}.yaml").is_file()]
            if not missing:
                continue
            values = missing
        elif has_key(cfg, key):
            continue
        owner = owner_of(key, components(cfg)[0])
        if owner is not None and key[len(owner.path) + 1 :] in owner.settings:
            refuse(
                f"{key} is a setting of {owner.cls.__name__} that its config file leaves out; "
                f"a multirun sweeps it as an addition: +{override.input_line}"
            )
        unknown.append(f"{key}={values[0]}")
    if unknown:
        refuse_with_hints(config_name, unknown)


def nearest(config_name: str | None, overrides: list[str]) -> list[str]:
    """A line per mistyped override naming the nearest valid names (composes: only on a
    mistake's path); none where they cannot be found."""
    try:
        return nearest_names(config_dir(), config_name or "", overrides)
    except Exception:  # hints are a courtesy; never mask the real error
        return []


def refuse_with_hints(config_name: str | None, overrides: list[str]) -> NoReturn:
    hints = nearest(config_name, overrides)
    refuse("\nerror: ".join(hints) or f"no key {overrides[0].split('=', 1)[0]!r} to set")


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
