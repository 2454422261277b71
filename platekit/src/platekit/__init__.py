"""platekit: the machinery under a torchplate project.

A baked project owns its data modules, nets, configs and recipes; this package runs them:
config checks, the trainer, checkpoints that rebuild themselves and load safely, exact
resume, export, predict, serve, sweeps, doctor and bench. Its public API (kept stable
across minor versions, see README.md) is what this module and its subpackages' ``__init__``
files name (``platekit.data``, ``platekit.models``, ``platekit.checkpoints``,
``platekit.config``, ``platekit.training``, ``platekit.commands``) with ``platekit.settings``
and ``platekit.testing``; every other module is private (its name starts with ``_``).
"""

from importlib import metadata

from platekit._errors import UserError
from platekit._project import Project, current, use

try:  # the installed build's: a development wheel's version names its source's hash
    __version__ = metadata.version("platekit")
except metadata.PackageNotFoundError:  # the source tree itself, not installed
    __version__ = "unknown"

__all__ = ["Project", "UserError", "__version__", "current", "use"]
