"""The project a command runs for: its package, its folder and its configs.

The support package never guesses where a project is. Each baked project says it once, in
its package's ``__init__.py``::

    PROJECT = Project.at(__name__, __file__)

and ``platekit.use(PROJECT)`` makes it the current project of the process: the one the
commands (``platekit.commands.command``), the configs and the class registry refer to.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

CONFIG_DIR_ENV = "CONFIG_DIR"  # another configs/ folder for every command (tests use it)


@dataclass(frozen=True)
class Project:
    """A baked project.

    Args:
        package: the project's import name (``digits_classifier``): its classes may be named
            by configs and checkpoints, and its commands run as ``python -m <package>.<name>``.
        root: the project folder (``configs/``, ``pyproject.toml``, ``outputs/`` by default).
        config_dir: the Hydra config folder, absolute.
    """

    package: str
    root: Path
    config_dir: Path

    @classmethod
    def at(cls, package: str, init_file: str) -> "Project":
        """The project whose package ``__init__.py`` is ``init_file`` (``src/<package>/``)."""
        root = Path(init_file).resolve().parents[2]
        configs = os.environ.get(CONFIG_DIR_ENV)
        return cls(package, root, Path(configs).resolve() if configs else root / "configs")

    def command(self, config_name: str, task: Callable[[DictConfig], Any]) -> Any:
        """Gone in platekit 0.3: a project baked before says so in one line, and how to mend it."""
        raise SystemExit(
            f"error: {self.package}'s `PROJECT.command({config_name!r}, ...)` is platekit 0.2's; "
            f"write `main = platekit.commands.command({config_name!r}, ...)` instead "
            "(see a project baked from the current template)"
        )


_current: Project | None = None


def use(project: Project) -> Project:
    """Make ``project`` the one commands, configs and the class registry refer to."""
    global _current
    _current = project
    return project


def current() -> Project:
    """The project of this process (set by its package's ``PROJECT.command`` or ``use``)."""
    if _current is None:
        raise RuntimeError(
            "no project is set: import the project's package, or call platekit.use(Project...)"
        )
    return _current
