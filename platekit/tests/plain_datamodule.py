"""A data module written from scratch, the way the Lightning docs show one: no project base.

The contract tests train it to check what such a module still gets (training, DDP shards,
eval, export) and that the one warning names what it does not.
"""

from collections.abc import Iterator

import torch
from lightning import LightningDataModule
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, random_split


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


class PlainSequences(LightningDataModule):
    """Token sequences of length 5-40 padded per batch by a collate function, the way a
    plain module pads text: a shuffled batch of two is as long as its longer sequence.

    It declares what varies (``varying_axes``), its padding and its vocabulary; with
    ``declare=False`` it declares nothing, as modules written before did.
    """

    num_classes = 3
    padding_value = 0.0
    vocab_size = 13

    def __init__(self, batch_size: int = 2, declare: bool = True, seed: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters()
        if declare:
            self.varying_axes = {0: 40}

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        targets = torch.arange(240) % 3
        sequences = []
        for label in targets.tolist():
            length = int(torch.randint(5, 41, (1,), generator=generator))
            tokens = 1 + torch.randint(0, 12, (length,), generator=generator)
            favoured = torch.rand(length, generator=generator) < 0.6
            sequences.append(torch.where(favoured, 1 + 4 * label + tokens % 4, tokens).float())
        data = list(zip(sequences, targets, strict=True))
        self.train_set, self.val_set, self.test_set = random_split(
            data, [160, 40, 40], generator=torch.Generator().manual_seed(self.hparams.seed)
        )

    def loader(self, data: Dataset, batch_size: int, shuffle: bool = False) -> DataLoader:
        return DataLoader(data, batch_size=batch_size, shuffle=shuffle, collate_fn=pad_batch)

    def train_dataloader(self) -> DataLoader:
        return self.loader(self.train_set, self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader(self.val_set, 16)

    def test_dataloader(self) -> DataLoader:
        return self.loader(self.test_set, 16)


def pad_batch(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad a batch's sequences with 0 to the longest of them."""
    sequences, targets = zip(*items, strict=True)
    padded = torch.nn.utils.rnn.pad_sequence(list(sequences), batch_first=True, padding_value=0.0)
    return padded, torch.stack(list(targets))


class StreamedSequences(PlainSequences):
    """The same sequences from an iterable dataset: no first item to read a shape from."""

    def train_dataloader(self) -> DataLoader:
        return DataLoader(Stream(list(self.train_set)), batch_size=2, collate_fn=pad_batch)


class Stream(IterableDataset):
    def __init__(self, items: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(self.items)
