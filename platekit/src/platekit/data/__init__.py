"""Data modules: the contract every one follows (``BaseDataModule``), the generic ones (CSV,
image folders) and the sequence example.

Names are imported on first use, so a command that needs only the data card or the input
readers (ONNX predict) does not import torch.
"""

from platekit._lazy import lazy_exports

EXPORTS = {
    "BaseDataModule": "._base",
    "Rows": "._base",
    "CsvDataModule": "._csv",
    "DataInfo": "._info",
    "ImageFolderDataModule": "._image_folder",
    "SequenceDataModule": "._sequences",
    "read_sklearn_table": "._examples",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
