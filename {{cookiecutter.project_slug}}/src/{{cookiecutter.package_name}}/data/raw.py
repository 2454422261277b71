"""A split as the raw inputs a user would feed the shipped model (before normalisation)."""

import numpy as np
from lightning import LightningDataModule


def raw_split(datamodule: LightningDataModule, name: str) -> np.ndarray:
    """The inputs of split ``name`` with the data module's normalisation undone.

    ``datamodule`` must be set up; the result is float32 ``(N, *input_shape)``, the same
    scale as ``load_raw()`` yields (up to float rounding).
    """
    inputs = datamodule.splits[name].inputs.cpu()
    return (inputs * datamodule.std + datamodule.mean).numpy().astype(np.float32)
