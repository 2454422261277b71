"""Batches drawn from in-memory tensors in an order that can be replayed exactly.

The order of every epoch is a pure function of ``(seed, epoch)``, and the sampler
remembers how many batches of the current epoch were consumed, so a run resumed from a
checkpoint sees the same batches as one that was never stopped. It is the single source of
both the order and the resume state: whatever loader iterates it exposes it as ``.sampler``.
"""

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler, SequentialSampler

from platekit._errors import UserError, shown


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


class EpochBatchSampler(Sampler[Tensor | tuple[int, Tensor]]):
    """Yield index batches; shuffled per epoch from ``seed`` and sharded across ranks.

    Lightning calls :meth:`set_epoch` before each epoch. Under DDP each rank takes every
    ``world_size``-th index of the same permutation (padded to equal length), so shards
    are disjoint and every rank runs the same number of steps; an evaluation split (in
    order) is not padded, so that no row counts twice in its figures: a shorter shard is
    cut into as many (smaller) batches instead. With ``with_epoch`` each
    batch comes as ``(epoch, indices)``, for datasets whose samples depend on the epoch.
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
        with_epoch: bool = False,
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
        self.with_epoch = with_epoch
        self.epoch = 0
        self.skip = 0  # batches of `epoch` to skip on the next pass (mid-epoch resume)
        self.consumed = 0  # batches of `epoch` the training loop has finished

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:  # a pending skip belongs to the epoch it was saved in
            self.skip = self.consumed = 0
        self.epoch = epoch

    def mark_consumed(self, batches: int) -> None:
        """Record that the training loop has finished ``batches`` batches of this epoch.

        Loaders prefetch ahead of training, so the loop, not this iterator, knows how far
        training got; the ``ExactResume`` callback calls this after every training step.
        """
        self.consumed = batches

    def _shard(self) -> Tensor:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.size, generator=generator)
        else:
            order = torch.arange(self.size)
        per_rank = -(-self.size // self.world_size)  # ceil
        padding = per_rank * self.world_size - self.size
        if padding and not self.counts_each_row_once():
            order = torch.cat([order, order[:padding]])
        return order[self.rank :: self.world_size]

    def counts_each_row_once(self) -> bool:
        """Whether the shards are left unpadded: an evaluation split in order (a padded row
        would count twice in its figures), its shorter shards cut into as many batches as
        the longest's (every rank runs the same steps) with no batch left empty."""
        per_rank = -(-self.size // self.world_size)
        return not self.shuffle and not self.drop_last and per_rank - 1 >= len(self)

    def __len__(self) -> int:
        per_rank = -(-self.size // self.world_size)
        if self.drop_last:
            return per_rank // self.batch_size
        return -(-per_rank // self.batch_size)

    def __iter__(self) -> Iterator[Tensor | tuple[int, Tensor]]:
        shard = self._shard()
        if len(shard) * self.world_size < self.size:  # an unpadded short shard: same steps
            batches = list(shard.tensor_split(len(self)))
        else:
            batches = list(shard.split(self.batch_size))
        if self.drop_last and len(batches[-1]) < self.batch_size:
            batches.pop()
        start, self.skip = self.skip, 0
        self.consumed = start
        if not self.with_epoch:
            yield from batches[start:]
            return
        # The dataset (a copy in each worker) learns the epoch from the batch it is given.
        for batch in batches[start:]:
            yield self.epoch, batch

    def state_dict(self) -> dict[str, int]:
        """Where a resumed run starts: ``epoch`` and the batches of it already consumed."""
        return {"epoch": self.epoch, "skip": max(self.skip, self.consumed)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        epoch, skip = (state.get(key) if isinstance(state, dict) else None for key in KEYS)
        if not (whole(epoch, 0, MAX_EPOCH) and whole(skip, 0, len(self))):
            raise UserError(
                f"the checkpoint's sampler position {shown(state)} is not one this data can "
                f"take (epoch 0 to {MAX_EPOCH}, skip 0 to its {len(self)} batches); resume "
                "from a checkpoint of this project's train on this data, or start from its "
                "weights with init_from=..."
            )
        self.epoch = int(epoch)  # type: ignore[arg-type]
        self.skip = int(skip)  # type: ignore[arg-type]
        self.consumed = 0
        if self.skip >= len(self):  # saved after the epoch's last batch: start the next one
            self.epoch, self.skip = self.epoch + 1, 0


KEYS = ("epoch", "skip")
MAX_EPOCH = 10**9  # no run trains longer


def whole(value: object, low: int, high: int) -> bool:
    """Whether ``value`` is a whole number (an int, or an integer tensor) in [low, high]."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = int(value.item())
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


# SequentialSampler is a marker for Lightning here; its per-index __iter__ is not used.
class InOrderBatchSampler(EpochBatchSampler, SequentialSampler):  # type: ignore[misc]
    """An :class:`EpochBatchSampler` that never shuffles: the same batches every epoch.

    For ``trainer.overfit_batches``: Lightning leaves a loader whose sampler is a
    ``SequentialSampler`` as it is; any other it warns about and, if the loader has a
    ``.dataset``, replaces with a per-sample one (which the batch datasets here cannot read).
    """

    def __init__(self, size: int, batch_size: int, **settings: Any) -> None:
        EpochBatchSampler.__init__(self, size, batch_size, **{**settings, "shuffle": False})
