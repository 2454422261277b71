"""scikit-learn's digits: 1,797 real 8x8 grey images of handwritten 0-9, shipped offline."""

import importlib.util
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader

from ..cli.errors import UserError
from .loading import in_memory_loader
from .sampling import EpochBatchSampler, TensorPairs

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")
Batch = tuple[Tensor, Tensor]


class DigitsDataModule(LightningDataModule):
    """Train/val/test splits of digits, held in memory as normalised float tensors.

    The split is fixed by ``seed``; the normalisation mean and std come from the train
    split only, so nothing about val or test leaks into training.
    """

    num_classes = 10
    input_shape = (1, 8, 8)

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        seed: int = 0,
        num_workers: int = 0,
        eval_batch_size: int = 512,
    ) -> None:
        super().__init__()
        if not 0 < val_fraction + test_fraction < 1:
            raise UserError(
                f"data.val_fraction + data.test_fraction = {val_fraction + test_fraction} "
                "must be between 0 and 1; lower them"
            )
        self.save_hyperparameters()
        self.splits: dict[str, TensorPairs] = {}
        self.rows: dict[str, Tensor] = {}  # each split's row indices into load_raw()
        self.mean = 0.0
        self.std = 1.0
        self.train_sampler: EpochBatchSampler | None = None
        self._train_sampler_state: dict[str, int] | None = None  # from a checkpoint

    def load_raw(self) -> tuple[Tensor, Tensor]:
        """All images as ``(N, 1, 8, 8)`` float32 in [0, 1] and labels as ``(N,)`` int64."""
        pixels, labels = read_digits()
        images = torch.as_tensor(pixels, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
        return images, torch.as_tensor(labels, dtype=torch.int64)

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        inputs, targets = self.load_raw()
        order = torch.randperm(
            len(inputs), generator=torch.Generator().manual_seed(self.hparams.seed)
        )
        n_val = round(len(inputs) * self.hparams.val_fraction)
        n_test = int(len(inputs) * self.hparams.test_fraction)
        n_train = len(inputs) - n_val - n_test
        parts = dict(zip(SPLITS, order.split([n_train, n_val, n_test]), strict=True))
        for name, index in parts.items():
            check_finite(name, inputs[index], index)
        train = inputs[parts["train"]]
        self.mean, self.std = train.mean().item(), train.std().item()
        self.splits = {
            name: TensorPairs((inputs[index] - self.mean) / self.std, targets[index])
            for name, index in parts.items()
        }
        self.rows = parts
        log.info("digits: %s", ", ".join(f"{name} {len(self.splits[name])}" for name in SPLITS))

    def raw_inputs(self, split: str) -> Tensor:
        """The inputs of ``split`` before normalisation: what a user feeds the shipped model.

        Exactly the rows of ``load_raw()`` the split holds (the data module must be set up).
        """
        return self.load_raw()[0][self.rows[split]]

    def train_dataloader(self) -> Iterable[Batch]:
        return self._loader("train", self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> Iterable[Batch]:
        return self._loader("val", self.hparams.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> Iterable[Batch]:
        return self._loader("test", self.hparams.eval_batch_size, shuffle=False)

    def _loader(self, split: str, batch_size: int, *, shuffle: bool) -> Iterable[Batch]:
        trainer = self.trainer
        sampler = EpochBatchSampler(
            len(self.splits[split]),
            batch_size,
            shuffle=shuffle,
            seed=self.hparams.seed,
            rank=trainer.global_rank if trainer else 0,
            world_size=trainer.world_size if trainer else 1,
        )
        if shuffle:  # the train split: its sampler holds the resume state
            if self._train_sampler_state is not None:
                sampler.load_state_dict(self._train_sampler_state)
                self._train_sampler_state = None
            self.train_sampler = sampler
        device = trainer.strategy.root_device if trainer else torch.device("cpu")
        data = self.splits[split]
        workers = self.hparams.num_workers
        if workers == 0:
            return in_memory_loader(data, sampler, device)
        return DataLoader(
            data,
            sampler=sampler,
            batch_size=None,  # the sampler yields whole batches of indices
            num_workers=workers,
            persistent_workers=True,
            pin_memory=device.type == "cuda",
            generator=torch.Generator().manual_seed(self.hparams.seed),
        )

    def transfer_batch_to_device(self, batch: Batch, device: torch.device, index: int) -> Batch:
        # A batch is a pair of tensors: move them directly. Lightning's default walks any
        # nested structure, which costs a small model a noticeable share of its step.
        inputs, targets = batch
        non_blocking = device.type == "cuda"  # pinned host batches copy while compute runs
        return (
            inputs.to(device, non_blocking=non_blocking),
            targets.to(device, non_blocking=non_blocking),
        )

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"mean": self.mean, "std": self.std}
        if self.train_sampler is not None:
            state["train_sampler"] = self.train_sampler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.mean, self.std = state_dict["mean"], state_dict["std"]
        # Applied when the train loader is built, before Lightning first iterates it.
        self._train_sampler_state = state_dict.get("train_sampler")


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """Pixels ``(N, 64)`` in 0..16 and labels ``(N,)``, from the file scikit-learn ships.

    The file is read directly: importing scikit-learn to call ``load_digits`` would add
    about half a second to every run's start. Should the file move, ``load_digits`` is used.
    """
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.data, digits.target
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)  # 64 pixels, then the label
    return table[:, :-1], table[:, -1].astype(np.int64)


def check_finite(split: str, inputs: Tensor, rows: Tensor) -> None:
    """Raise a UserError naming the first row of ``split`` holding NaN or Inf."""
    bad = ~torch.isfinite(inputs.flatten(1)).all(dim=1)
    if bad.any():
        first = int(bad.nonzero()[0])
        raise UserError(
            f"data split '{split}' row {first} (dataset index {int(rows[first])}) holds "
            f"NaN or Inf ({int(bad.sum())} bad rows in all); clean or drop those rows"
        )
