"""Refuse a mistyped value before a command imports torch and Lightning.

``python -m <package>.<command>`` imports the package first, then the command's module,
whose imports (torch, Lightning, the recipe) take most of a command's start-up: a config
error found after them costs those seconds before its one line. So the package's
``__init__.py`` calls ``check_command_line(PROJECT)``: when this process was launched as
one of the project's commands (``configs/<command>.yaml`` exists), the config is composed and
checked against the rules that need no component class (``config/_schema.py``), and a
problem ends the process there. A command line that sets a component's setting
(``data.batch_size=0``) skips this pass, so that its problems and the others are listed
together, as the full check lists them. Everything else (a component's settings, a sweep's
values, Hydra's own errors) is checked as before, once the command runs: this pass only
answers sooner, it never refuses what the full check would take.
"""

import sys
from pathlib import Path

from omegaconf import OmegaConf

from platekit._project import Project
from platekit.config._precheck import plan, report
from platekit.config._resume import run_dir
from platekit.config._schema import COMPONENTS

# The config's first keys under which components (classes with their own settings) sit.
COMPONENT_ROOTS = frozenset(pattern.split(".")[0] for pattern, _ in COMPONENTS)


def launched_command(package: str, argv: list[str]) -> tuple[str, list[str]] | None:
    """``(command, arguments)`` when ``argv`` (the interpreter's own) runs
    ``python -m <package>.<command> arguments...``, else None."""
    if "-m" not in argv:
        return None
    at = argv.index("-m")
    module = argv[at + 1] if at + 1 < len(argv) else ""
    command = module.removeprefix(f"{package}.")
    if command == module or not command.isidentifier():
        return None
    return command, argv[at + 2 :]


def early_problems(config_dir: Path, command: str, arguments: list[str]) -> list[str]:
    """The problems the class-free rules find in ``configs/<command>.yaml`` + ``arguments``."""
    path = config_dir / f"{command}.yaml"
    if not path.is_file() or any(sets_a_component(argument) for argument in arguments):
        return []
    # hydra.run.dir of train.yaml asks this where a resumed run continues (as commands/_entry.py).
    OmegaConf.register_new_resolver("run_dir", run_dir, replace=True)
    if any(line.strip() == "data: {}" for line in path.read_text().splitlines()):
        # data.<setting>=... adds to the empty data node, as the entry point does.
        arguments = [f"+{a}" if a.startswith("data.") and "=" in a else a for a in arguments]
    return plan(config_dir, command, arguments, with_components=False).problems


def sets_a_component(argument: str) -> bool:
    """``data.batch_size=0``, ``+model.net.width=8``: a setting a class declares."""
    key = argument.lstrip("+~").split("=", 1)[0]
    return "." in key and key.split(".", 1)[0] in COMPONENT_ROOTS


def refuse_bad_config_early(package: str, config_dir: Path) -> None:
    """Exit 1 with the entry point's one ``error:`` report if the class-free rules fail."""
    launched = launched_command(package, list(getattr(sys, "orig_argv", [])))
    if launched is None:
        return
    found = early_problems(config_dir, *launched)
    if found:
        print(f"error: {report(found)}", flush=True)
        sys.exit(1)


def check_command_line(project: Project) -> None:
    """Refuse a mistyped value of this process's command line before torch is imported:
    called by a project's ``__init__.py``, right after ``Project.at``."""
    refuse_bad_config_early(project.package, project.config_dir)
