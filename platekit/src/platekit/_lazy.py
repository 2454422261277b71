"""Package attributes imported on first use, so light commands skip heavy imports."""

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from ``exports[name]`` (relative;
    ``"._module:other"`` exports ``other`` under ``name``).

    ``from .data import DigitsDataModule`` and Hydra's ``_target_`` lookups work as with
    eager imports; ``import <package>.data.info`` alone no longer pulls in torch.
    """

    def attribute(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute_name = exports[name].partition(":")  # "._doctor:main"
        return getattr(import_module(module, package), attribute_name or name)

    return attribute
