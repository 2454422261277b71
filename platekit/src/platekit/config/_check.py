"""Check a composed config: the problems of a run, and the command line Hydra should read.

A command's config is checked once, as Hydra composed it, by the ``CheckRun`` callback
(``commands/_run_check.py``) before Hydra makes the run directory: a refused run creates
nothing, and a resumed run's ``.hydra/`` and log stay as they were. No config is composed for
the check itself.

A key the config files leave out is, to Hydra, a key that does not exist. Where it lies in a
component (``data.noise=0.1``: ``data`` names a class by ``_target_``) the class decides:
``addition`` names such an override, the entry point gives it to Hydra again as
``+data.noise=0.1``, and the check then takes the setting if the class's ``__init__``
declares it, or names the nearest settings (``data.nosie is not a setting of ...``). So
with an argument of Lightning's Trainer (``trainer.max_steps=5``) or of one of Lightning's
callbacks (``callbacks.early_stopping.min_delta=0.01``).

In a multirun each value a listed sweep gives (``a=1,2``, ``range(1,4)``) is checked by its
key's rule; the values a sweeper picks itself (Optuna's ``interval(...)``) are checked by
each job when it starts (``commands/_entry.py``).
"""

import re
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

from platekit.config._schema import COMPONENTS, complaint, problems, rule_at
from platekit.config._trainer import trainer_argument
from platekit.config._typos import moved_key

# The config's first keys under which components (classes with their own settings) sit.
COMPONENT_ROOTS = frozenset(pattern.split(".")[0] for pattern, _ in COMPONENTS)

MISSING = re.compile(r"Could not override '([^']+)'")


def addition(error: Exception, overrides: list[str]) -> int | None:
    """The index of the override Hydra refused with ``error`` because the config files leave
    its key out, where that key lies in a component (``data.noise=0.1``) or is an argument of
    Lightning's Trainer (``trainer.max_steps=5``); else None."""
    match = MISSING.match(str(error)) if isinstance(error, ConfigCompositionException) else None
    key = match.group(1) if match else ""
    if "." not in key or moved_key(key):
        return None
    if key.split(".", 1)[0] not in COMPONENT_ROOTS and not trainer_argument(key):
        return None
    return next((i for i, line in enumerate(overrides) if line.split("=", 1)[0] == key), None)


def run_problems(cfg: DictConfig, *, multirun: bool = False) -> list[str]:
    """One line per problem of ``cfg`` (composed with its ``hydra`` node), and in a multirun
    of each value a listed sweep of its command line gives."""
    # As the run will see it (Hydra sets it again itself); a value that does not resolve is
    # named by its rule.
    with read_write(cfg), open_dict(cfg), suppress(Exception):
        cfg.hydra.runtime.output_dir = str(cfg.hydra.sweep.dir if multirun else cfg.hydra.run.dir)
    hydra = HydraConfig.instance()
    before = hydra.cfg
    try:
        hydra.set_config(cfg)  # for ${hydra:...} values, such as paths.output_dir
        found = problems(cfg)
        if multirun:
            found += swept_problems(cfg, list(cfg.hydra.overrides.task))
    finally:
        hydra.cfg = before
    return found


def swept_problems(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """A line for each value a listed sweep (``seed=0,-1``, ``range(...)``) gives that
    breaks the rule of its key."""
    found = []
    for override in OverridesParser.create().parse_overrides(overrides):
        if not override.is_discrete_sweep():
            continue
        rule = rule_at(cfg, override.key_or_group)
        if rule is None or rule.checked_elsewhere:
            continue
        found += [
            complaint(override.key_or_group, value, rule)
            for value in override.sweep_iterator()
            if not rule.ok(value)
        ]
    return found


def run_directory(cfg: DictConfig) -> Path | None:
    """The directory a single run of ``cfg`` writes to; None for a multirun or where its
    value does not resolve (its rule names it)."""
    if cfg.hydra.mode == RunMode.MULTIRUN:
        return None
    try:
        return Path(str(cfg.hydra.run.dir))
    except Exception:
        return None


@dataclass(frozen=True)
class Checked:
    """A command line's problems, its run directory, and the overrides given as additions."""

    problems: list[str] = field(default_factory=list)
    run_dir: Path | None = None
    additions: tuple[str, ...] = ()

    def command_line(self, argv: list[str]) -> list[str]:
        """``argv`` as Hydra should read it: each of ``additions`` given with ``+``."""
        return [f"+{arg}" if arg in self.additions else arg for arg in argv]


def check(
    config_dir: Path, config_name: str, overrides: list[str], *, multirun: bool = False
) -> Checked:
    """What a command would find in ``configs/<config_name>.yaml`` with ``overrides``,
    without running it (for tests and documents: a command checks the config its Hydra
    composed). Hydra's own refusal raises its error."""
    lines, added = list(overrides), []
    while True:
        try:
            cfg = composed(config_dir, config_name, lines, multirun=multirun)
            break
        except ConfigCompositionException as error:
            index = addition(error, lines)
            if index is None:
                raise
            added.append(lines[index])
            lines[index] = f"+{lines[index]}"
    return Checked(run_problems(cfg, multirun=multirun), run_directory(cfg), tuple(added))


def composed(
    config_dir: Path, config_name: str, overrides: list[str], multirun: bool
) -> DictConfig:
    """The config a run of ``overrides`` gets, with its ``hydra`` node, as Hydra composes it
    (a multirun's sweeps left to the sweeper)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    multirun = multirun or any(o.is_sweep_override() for o in parsed)
    if multirun:
        overrides = [o.input_line for o in parsed if o.input_line and not o.is_sweep_override()]
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir)):
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    if multirun:
        with open_dict(cfg):
            cfg.hydra.mode = RunMode.MULTIRUN
            cfg.hydra.overrides.task = [o.input_line for o in parsed if o.input_line]
    return cfg


def report(found: list[str]) -> str:
    """``config has N problems:`` and one indented line each."""
    noun = "problem" if len(found) == 1 else "problems"
    return "\n".join([f"config has {len(found)} {noun}:", *(f"  {line}" for line in found)])
