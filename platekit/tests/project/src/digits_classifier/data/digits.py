"""scikit-learn's digits: 1,797 real 8x8 grey images of handwritten 0-9, shipped in platekit."""

from pathlib import Path

import numpy as np
import torch
from platekit.data import BaseDataModule, DataInfo, Rows, read_example_table


class DigitsDataModule(BaseDataModule):
    """Digits as ``(N, 1, 8, 8)`` float32 in [0, 1] (pixel values 0..16 divided by 16).

    Every argument is :class:`BaseDataModule`'s (batch sizes, split fractions, seed,
    workers, normalisation); the split and the statistics are the base's.
    """

    input_name = "images"

    def read(self) -> Rows:
        pixels, labels = read_digits()
        images = torch.as_tensor(pixels, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
        names = [str(digit) for digit in range(10)]
        return Rows(images, torch.as_tensor(labels, dtype=torch.int64), class_names=names)

    @classmethod
    def make_fixture(cls, directory: Path) -> dict[str, object]:
        return {}  # the data ships with platekit

    def describe_input(self, info: DataInfo) -> str:
        return (
            "float32 (N, 1, 8, 8): scikit-learn digits pixel values (0..16) divided by 16, "
            "so 0.0 is background and 1.0 full ink; N is free"
        )


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """Pixels ``(N, 64)`` in 0..16 and labels ``(N,)``, from the table platekit ships."""
    table = read_example_table("digits.csv.gz")
    return table[:, :-1], table[:, -1].astype(np.int64)  # 64 pixels, then the label
