"""Data modules: the contract every one follows (``BaseDataModule``), the generic ones (CSV,
image folders) and the sequence example.

Names are imported on first use, so a command that needs only the data card or the input
readers (ONNX predict) does not import torch.
"""

from typing import TYPE_CHECKING

from platekit._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them, imported eagerly
    from platekit.data._base import BaseDataModule as BaseDataModule
    from platekit.data._base import Rows as Rows
    from platekit.data._csv import CsvDataModule as CsvDataModule
    from platekit.data._examples import read_example_table as read_example_table
    from platekit.data._examples import read_sklearn_table as read_sklearn_table
    from platekit.data._image_folder import ImageFolderDataModule as ImageFolderDataModule
    from platekit.data._info import DataInfo as DataInfo
    from platekit.data._sequences import SequenceDataModule as SequenceDataModule

EXPORTS = {
    "BaseDataModule": "._base",
    "Rows": "._base",
    "CsvDataModule": "._csv",
    "DataInfo": "._info",
    "ImageFolderDataModule": "._image_folder",
    "SequenceDataModule": "._sequences",
    "read_example_table": "._examples",
    "read_sklearn_table": "._examples",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
