"""A data module written from scratch, the way the Lightning docs show one: no project base.

The contract tests train it to check what such a module still gets (training, DDP shards,
eval, export) and that the one warning names what it does not.
"""

import torch
from lightning import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset, random_split


class PlainBlobs(LightningDataModule):
    """Three Gaussian blobs in 4 dimensions, 240 rows; shuffled DataLoaders."""

    num_classes = 3

    def __init__(self, batch_size: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        targets = torch.arange(240) % 3
        centres = torch.tensor([[2.0, 0, 0, 0], [0, 2.0, 0, 0], [0, 0, 2.0, 0]])
        inputs = centres[targets] + 0.5 * torch.randn(240, 4, generator=generator)
        # The last feature is the row index / 1000, so a test can tell which rows a rank saw.
        inputs[:, 3] = torch.arange(240, dtype=torch.float32) / 1000
        data = TensorDataset(inputs, targets)
        self.train_set, self.val_set, self.test_set = random_split(
            data, [160, 40, 40], generator=torch.Generator().manual_seed(self.hparams.seed)
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=64)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=64)
