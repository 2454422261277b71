"""This project's data modules: subclasses of ``platekit.data.BaseDataModule``.

The generic ones (``platekit.data.CsvDataModule``, ``ImageFolderDataModule``) are named by
``configs/data/csv.yaml`` and ``image_folder.yaml``.
"""

from .digits import DigitsDataModule

__all__ = ["DigitsDataModule"]
