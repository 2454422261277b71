"""The commands a project runs (``python -m <package>.<command>``): each a function of the
composed config, made an entry point by ``command``, and platekit's own ``platekit`` tool.

Names are imported on first use: ``serve`` and ONNX ``predict`` load without torch.
"""

from typing import TYPE_CHECKING

from platekit._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them, imported eagerly
    from platekit.commands._bench import bench as bench
    from platekit.commands._doctor import main as doctor  # noqa: F401
    from platekit.commands._entry import command as command
    from platekit.commands._export import export as export
    from platekit.commands._predict import predict as predict
    from platekit.commands._run_check import CheckRun as CheckRun
    from platekit.commands._serve import serve as serve
    from platekit.commands._sweep import main as sweep  # noqa: F401

EXPORTS = {
    "CheckRun": "._run_check",
    "command": "._entry",
    "bench": "._bench",
    "doctor": "._doctor:main",
    "export": "._export",
    "predict": "._predict",
    "serve": "._serve",
    "sweep": "._sweep:main",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
