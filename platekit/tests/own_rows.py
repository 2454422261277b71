"""A team's own data module on the project's contract: rows from a .npy file it names.

The fingerprint tests change the file after training: eval must see that ``read()`` now
gives other rows.
"""

from pathlib import Path
from typing import Any

import numpy as np
import torch

from platekit.data import BaseDataModule, Rows


class NpyRows(BaseDataModule):
    """``path`` holds a float array (N, 5): four features, then the class (0, 1 or 2)."""

    def __init__(self, path: str = "rows.npy", normalize: str = "feature", **kwargs: Any) -> None:
        super().__init__(normalize=normalize, **kwargs)

    def read(self) -> Rows:
        array = np.load(Path(self.hparams.path))
        inputs = torch.from_numpy(array[:, :4].astype(np.float32))
        return Rows(inputs, torch.from_numpy(array[:, 4].astype(np.int64)), ["a", "b", "c"])


def write_rows(path: Path, count: int = 240, seed: int = 0) -> Path:
    generator = np.random.default_rng(seed)
    classes = np.arange(count) % 3
    features = generator.normal(size=(count, 4)) + classes[:, None]
    np.save(path, np.concatenate([features, classes[:, None]], axis=1))
    return path
