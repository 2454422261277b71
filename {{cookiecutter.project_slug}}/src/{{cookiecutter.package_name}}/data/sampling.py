"""Batches drawn from in-memory tensors in an order that can be replayed exactly.

The order of every epoch is a pure function of ``(seed, epoch)``, and the sampler
remembers how many batches of the current epoch were consumed, so a run resumed from a
checkpoint sees the same batches as one that was never stopped.
"""

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler


class TensorPairs(Dataset[tuple[Tensor, Tensor]]):
    """Inputs and targets held in memory, indexed by a whole batch of indices at once."""

    def __init__(self, inputs: Tensor, targets: Tensor) -> None:
        if len(inputs) != len(targets):
            raise ValueError(f"{len(inputs)} inputs but {len(targets)} targets")
        self.inputs = inputs
        self.targets = targets

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: Tensor) -> tuple[Tensor, Tensor]:
        return self.inputs[index], self.targets[index]


class EpochBatchSampler(Sampler[Tensor]):
    """Yield index batches; shuffled per epoch from ``seed`` and sharded across ranks.

    Lightning calls :meth:`set_epoch` before each epoch. Under DDP each rank takes every
    ``world_size``-th index of the same permutation (padded to equal length), so shards
    are disjoint and every rank runs the same number of steps.
    """

    def __init__(
        self,
        size: int,
        batch_size: int,
        *,
        shuffle: bool,
        seed: int,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.size = size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.skip = 0  # batches of the current epoch already consumed (mid-epoch resume)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _shard(self) -> Tensor:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.size, generator=generator)
        else:
            order = torch.arange(self.size)
        per_rank = -(-self.size // self.world_size)  # ceil
        padding = per_rank * self.world_size - self.size
        if padding:
            order = torch.cat([order, order[:padding]])
        return order[self.rank :: self.world_size]

    def __len__(self) -> int:
        per_rank = -(-self.size // self.world_size)
        if self.drop_last:
            return per_rank // self.batch_size
        return -(-per_rank // self.batch_size)

    def __iter__(self) -> Iterator[Tensor]:
        batches = list(self._shard().split(self.batch_size))
        if self.drop_last and len(batches[-1]) < self.batch_size:
            batches.pop()
        start, self.skip = self.skip, 0
        yield from batches[start:]

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "skip": self.skip}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self.skip = int(state["skip"])
