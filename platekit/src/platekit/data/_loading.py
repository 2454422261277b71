"""Loaders over in-memory tensors, and where those tensors should live.

With ``num_workers=0`` a ``DataLoader`` only adds per-batch machinery (fetcher, collation
checks) on top of indexing the tensors; :class:`InMemoryLoader` indexes them directly, and
normalises each batch as it is taken (:class:`SplitRows`). On
CUDA, data small enough lives on the GPU, so no step waits on a host-to-device copy.
"""

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from platekit.data._sampling import EpochBatchSampler, TensorPairs

DEVICE_SHARE = 0.25  # data moves onto the GPU if it takes at most this share of free memory


class ResumesExactly:
    """Tells Lightning the loader resumes mid-epoch: it has ``state_dict``/``load_state_dict``.

    The position itself is the sampler's, which the data module saves in every checkpoint
    and restores before the loader is iterated (``BaseDataModule.state_dict``), so the
    loader's own state is empty. Without these two methods Lightning warns on every
    mid-epoch resume that the loader is not resumable.
    """

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


class ResumableDataLoader(ResumesExactly, DataLoader[Any]):
    """A ``DataLoader`` over an :class:`EpochBatchSampler`, which holds the resume state."""


class SplitRows(TensorPairs):
    """One split of in-memory rows: ``inputs[index]``, normalised a batch at a time, so no
    normalised (or split) copy of the data is held. Indexed by positions in the split.

    Args:
        inputs: every row's raw inputs ``(N, ...)``.
        targets: every row's targets ``(N,)``.
        index: the split's rows; ``None``: all of them, in order.
        mean, std: the train split's statistics (``(x - mean) / std``, as ``normalise``).
    """

    def __init__(
        self,
        inputs: Tensor,
        targets: Tensor,
        index: Tensor | None = None,
        mean: Tensor | None = None,
        std: Tensor | None = None,
    ) -> None:
        super().__init__(inputs, targets)
        self.index = index
        self.mean, self.std = mean, std

    def __len__(self) -> int:
        return len(self.index) if self.index is not None else len(self.inputs)

    def __getitem__(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        rows = self.index[positions] if self.index is not None else positions
        inputs = self.inputs[rows]
        if self.mean is not None and self.std is not None:
            inputs = (inputs - self.mean) / self.std
        return inputs, self.targets[rows]

    @property
    def nbytes(self) -> int:
        return len(self) * (self.inputs[:1].nbytes + self.targets[:1].nbytes)

    def to(self, device: torch.device) -> "SplitRows":
        """The split's rows alone, on ``device`` (with the statistics)."""
        rows = self.index if self.index is not None else slice(None)
        mean, std = self.mean, self.std
        return SplitRows(
            self.inputs[rows].to(device),
            self.targets[rows].to(device),
            None,
            None if mean is None else mean.to(device),
            None if std is None else std.to(device),
        )


class InMemoryLoader(ResumesExactly):
    """Batches indexed straight from ``data`` in the order of an :class:`EpochBatchSampler`.

    ``sampler`` (and ``batch_sampler = None``) are exposed as a DataLoader built with
    ``sampler=..., batch_size=None`` exposes them, so Lightning's ``set_epoch`` and resume
    code reach the sampler the same way. The sampler is read lazily, one batch
    at a time, exactly as a DataLoader reads it.

    Args:
        data: inputs and targets, on the CPU or already on the training device.
        sampler: yields one tensor of row indices per batch.
        pin_memory: return batches in pinned host memory, so the copy to a CUDA device
            can overlap compute (for host data on a CUDA run).
    """

    def __init__(
        self, data: SplitRows, sampler: EpochBatchSampler, *, pin_memory: bool = False
    ) -> None:
        self.data = data
        self.sampler = sampler
        self.batch_sampler = None
        self.pin_memory = pin_memory

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        device = self.data.inputs.device
        for index in self.sampler:
            assert isinstance(index, Tensor)  # its sampler is built without with_epoch
            if device.type == "cuda":  # a pinned index copies without stalling the GPU
                index = index.pin_memory().to(device, non_blocking=True)
            inputs, targets = self.data[index]
            if self.pin_memory:
                inputs, targets = inputs.pin_memory(), targets.pin_memory()
            yield inputs, targets


def in_memory_loader(
    data: SplitRows, sampler: EpochBatchSampler, device: torch.device
) -> InMemoryLoader:
    """The loader for a run on ``device``: the split on the GPU if it fits, else pinned
    batches."""
    if device.type != "cuda":
        return InMemoryLoader(data, sampler)
    free, _ = torch.cuda.mem_get_info(device)
    if data.nbytes <= DEVICE_SHARE * free:
        return InMemoryLoader(data.to(device), sampler)
    return InMemoryLoader(data, sampler, pin_memory=True)
