"""Data modules: the contract every one follows (``base.py``), the generic ones (CSV, images)
and the sequence example.

Names are imported on first use, so a command that needs only ``data.info`` or
``data.inputs`` (ONNX predict) does not import torch.
"""

from ..runtime.lazy import lazy_exports

EXPORTS = {
    "BaseDataModule": ".base",
    "Rows": ".base",
    "CsvDataModule": ".csv",
    "DataInfo": ".info",
    "ImageFolderDataModule": ".image_folder",
    "SequenceDataModule": ".sequences",
}
__all__ = sorted(EXPORTS)

__getattr__ = lazy_exports(__name__, EXPORTS)
