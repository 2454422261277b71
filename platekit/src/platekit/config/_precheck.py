"""Check a command's config before Hydra makes its run directory.

``@hydra.main`` creates the run directory, ``.hydra/`` and the log file before the task
runs, and a resumed run's directory is the finished run's own. A check inside the task
would leave a directory behind for every rejected run, and on a resume rewrite the finished
run's ``.hydra/`` files and append to its log; removing them afterwards would need to know
which of them this process made. So the entry point composes the same config first
(Hydra's compose API, the same overrides, the hydra node included so ``hydra.run.dir`` is
checked too), checks it against ``config/_schema.py``, and exits 1 before Hydra starts:
a rejected run creates nothing, so there is nothing to delete. (Mistakes only the task can
see, such as a checkpoint that does not exist, come after Hydra started: ``commands/_rundir.py``
then removes the run directory if this run made it and wrote nothing there.)

A key the config files leave out is, to Hydra, a key that does not exist. Where it lies in a
component (``data.noise=0.1``: ``data`` names a class by ``_target_``) the class decides:
a setting its ``__init__`` declares is taken as given (the command line passes it to Hydra
as ``+data.noise=0.1``), and any other key is refused here naming the nearest settings
(``data.nosie is not a setting of ...``).

Command lines that run no task (``--help``, ``--cfg``, ``--info``, shell completion) go
straight to Hydra, as do those it cannot compose for another reason (a mistyped
``trainer.`` key): its own error and the typo hints say more. In a multirun each value a
listed sweep gives (``a=1,2``, ``range(1,4)``) is checked by its key's rule here; the
values a sweeper picks itself (Optuna's ``interval(...)``) are checked by each job when it
starts (``commands/_entry.py``).
"""

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from platekit.config._schema import complaint, components, owner_of, problems, rule_at
from platekit.config._typos import moved_key

# Hydra options after which no task runs, or which change where the config comes from.
PASS_THROUGH = (
    "help",
    "hydra_help",
    "cfg",
    "info",
    "shell_completion",
    "experimental_rerun",
    "config_path",
    "config_name",
    "config_dir",
)


@dataclass(frozen=True)
class Planned:
    """What the command line asks for: its config's problems and the run directory."""

    problems: list[str] = field(default_factory=list)
    run_dir: Path | None = None  # a single run's; None for a multirun or when unknown
    # Overrides of settings a component declares but its config file leaves out: Hydra
    # takes them as additions (``+data.noise=0.1``).
    additions: tuple[str, ...] = ()

    def command_line(self, argv: list[str]) -> list[str]:
        """``argv`` as Hydra should read it: each of ``additions`` given with ``+``."""
        return [f"+{arg}" if arg in self.additions else arg for arg in argv]


def plan(
    config_dir: Path, config_name: str, argv: list[str], *, with_components: bool = True
) -> Planned:
    """Compose the config ``argv`` asks for and check it; nothing where Hydra should decide.

    ``with_components=False``: only the rules that need no component class (see
    ``early_problems``).
    """
    if "--version" in argv:
        return Planned()
    parser = get_args_parser()
    parser.exit_on_error = False
    try:
        args, unknown = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit):
        return Planned()
    if unknown or any(getattr(args, option, None) for option in PASS_THROUGH):
        return Planned()
    try:
        return check(
            config_dir,
            config_name,
            args.overrides,
            multirun=args.multirun,
            with_components=with_components,
        )
    except Exception:  # Hydra reports it (and the hints follow) when the command runs
        return Planned()


def check(
    config_dir: Path,
    config_name: str,
    overrides: list[str],
    *,
    multirun: bool = False,
    with_components: bool = True,
) -> Planned:
    """Compose ``config_name`` with ``overrides`` and check it against the schema."""
    cfg, run_dir, added = with_component_keys(config_dir, config_name, overrides, multirun)
    hydra = HydraConfig.instance()
    before = hydra.cfg
    try:
        hydra.set_config(cfg)  # for ${hydra:...} values, such as paths.output_dir
        found = problems(cfg, with_components=with_components)
        if with_components:
            found += swept_problems(cfg, overrides)
    finally:
        hydra.cfg = before
    unknown = {line.split(" ", 1)[0] for line in found if " is not a setting of " in line}
    additions = tuple(line for line in added if line.split("=", 1)[0] not in unknown)
    return Planned(found, run_dir, additions)


MISSING = re.compile(r"Could not override '([^']+)'")


def with_component_keys(
    config_dir: Path, config_name: str, overrides: list[str], multirun: bool
) -> tuple[DictConfig, Path | None, list[str]]:
    """The composed config, its run directory, and the overrides given as additions.

    An override Hydra refuses because the config files leave its key out is given again as
    ``+key=value`` when the key lies in a component; the schema then takes it or names it.
    Any other key Hydra refuses raises Hydra's error.
    """
    lines = list(overrides)
    added: list[str] = []
    first: ConfigCompositionException | None = None
    while True:
        try:
            cfg, run_dir = composed(config_dir, config_name, lines, multirun=multirun)
            break
        except ConfigCompositionException as error:
            first = first or error
            match = MISSING.match(str(error))
            key = match.group(1) if match else ""
            index = next(
                (i for i, line in enumerate(lines) if line.split("=", 1)[0] == key and key),
                None,
            )
            if index is None or moved_key(key):
                raise first from None
            added.append(lines[index])
            lines[index] = f"+{lines[index]}"
    if added:
        found, _ = components(cfg)
        if any(owner_of(line.split("=", 1)[0], found) is None for line in added):
            assert first is not None
            raise first  # not a component's key: Hydra's error and the hints say it
    return cfg, run_dir, added


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


def composed(
    config_dir: Path, config_name: str, overrides: list[str], multirun: bool
) -> tuple[DictConfig, Path | None]:
    """The config a run of ``overrides`` gets, with its ``hydra`` node, and its run directory."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    if multirun or any(o.is_sweep_override() for o in parsed):
        overrides = [o.input_line for o in parsed if o.input_line and not o.is_sweep_override()]
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir)):
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    multi = multirun or cfg.hydra.mode == RunMode.MULTIRUN
    try:
        output_dir = str(cfg.hydra.sweep.dir if multi else cfg.hydra.run.dir)
    except Exception:  # left unresolved: problems() names the value
        return cfg, None
    with open_dict(cfg):  # as the run will see it
        cfg.hydra.runtime.output_dir = output_dir
    return cfg, None if multi else Path(output_dir)


def report(found: list[str]) -> str:
    """``config has N problems:`` and one indented line each."""
    noun = "problem" if len(found) == 1 else "problems"
    return "\n".join([f"config has {len(found)} {noun}:", *(f"  {line}" for line in found)])
