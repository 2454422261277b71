"""The commands a project runs (``python -m <package>.<command>``): each a function of the
composed config, made an entry point by ``command``, and platekit's own ``platekit`` tool.

Names are imported on first use: ``serve`` and ONNX ``predict`` load without torch.
"""

from platekit._lazy import lazy_exports

EXPORTS = {
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
