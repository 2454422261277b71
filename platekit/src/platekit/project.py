"""The project a command runs for: its package, its folder and its configs.

The support package never guesses where a project is. Each baked project says it once, in
its package's ``__init__.py``::

    PROJECT = Project.at(__name__, __file__)

and its commands run through ``PROJECT.command(...)``, which makes it the current project.
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
        project = cls(package, root, Path(configs).resolve() if configs else root / "configs")
        # `python -m <package>.<command>` with a wrong value: say so before the command's
        # module imports torch and Lightning (seconds), not after.
        from .cli.early import refuse_bad_config_early

        refuse_bad_config_early(package, project.config_dir)
        return project

    def command(self, config_name: str, task: Callable[[DictConfig], Any]) -> Callable[[], None]:
        """``task`` as a console entry point reading ``configs/<config_name>.yaml``."""
        from .cli.entry import command

        use(self)
        return command(config_name)(task)


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
