"""platekit: the machinery under a torchplate project.

A baked project owns its data modules, nets, configs and recipes; this package runs them:
config checks, the trainer, checkpoints that rebuild themselves and load safely, exact
resume, export, predict, serve, sweeps, doctor and bench. Its public API (kept stable
across minor versions, see README.md) is what this module names; the rest is private.
"""

from importlib import metadata

from .project import Project, current, use

try:  # the installed build's: a development wheel's version names its source's hash
    __version__ = metadata.version("platekit")
except metadata.PackageNotFoundError:  # the source tree itself, not installed
    __version__ = "unknown"

__all__ = ["Project", "__version__", "current", "use"]
