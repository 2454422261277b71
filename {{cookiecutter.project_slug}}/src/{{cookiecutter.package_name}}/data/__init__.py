"""Data modules: the contract every one follows (``base.py``) and the ones that ship."""

from .base import BaseDataModule, Rows
from .csv import CsvDataModule
from .digits import DigitsDataModule
from .image_folder import ImageFolderDataModule
from .info import DataInfo

__all__ = [
    "BaseDataModule",
    "CsvDataModule",
    "DataInfo",
    "DigitsDataModule",
    "ImageFolderDataModule",
    "Rows",
]
