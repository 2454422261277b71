"""Data modules: the contract every one follows (``base.py``) and the ones that ship.

Names are imported on first use, so a command that needs only ``data.info`` or
``data.inputs`` (ONNX predict) does not import torch.
"""

from importlib import import_module
from typing import Any

EXPORTS = {
    "BaseDataModule": ".base",
    "Rows": ".base",
    "CsvDataModule": ".csv",
    "DataInfo": ".info",
    "DigitsDataModule": ".digits",
    "ImageFolderDataModule": ".image_folder",
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(EXPORTS[name], __name__), name)
