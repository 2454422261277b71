"""The data contract: subclass :class:`BaseDataModule`, implement :meth:`~BaseDataModule.read`.

A subclass says how to read its raw rows; this base owns everything else, and every other
part of the project (the model's sizes, checkpoints, export, predict, bench) reads only
what it exposes here:

- the seeded train/val/test split (or the splits ``read`` gives), fixed by ``seed``;
- normalisation statistics from the train split only, as tensors (scalar, per channel or
  per feature), applied to every split and baked into the exported model;
- the sampler: an order that is a function of ``(seed, epoch)``, sharded across DDP ranks,
  with its position saved in checkpoints so a resumed run sees the same batches;
- two loader paths: batches sliced straight from in-memory tensors (``num_workers=0``, no
  per-sample work), or a DataLoader whose workers decode and augment each sample with
  randomness drawn from ``(seed, epoch, sample index)``, so augmentation resumes exactly;
- metadata (:class:`DataInfo`): input shape, target kind, class names, the input's name and
  description, and the background level images were trained with.

A minimal subclass::

    class MyData(BaseDataModule):
        def read(self) -> Rows:
            inputs = torch.load(...)               # (N, *input_shape) float32, raw
            targets = torch.load(...)              # (N,) int64 class indices
            return Rows(inputs, targets, class_names=["cat", "dog"])
"""

import logging
import math
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
from lightning import LightningDataModule
from lightning.fabric.utilities.data import AttributeDict
from torch import Tensor
from torch.utils.data import Dataset

from platekit._errors import UserError, first_line, inert
from platekit.config._nodes import to_plain
from platekit.data import _fingerprint as fingerprint
from platekit.data._info import DataInfo
from platekit.data._loading import ResumableDataLoader, SplitRows, in_memory_loader
from platekit.data._memory import return_freed_memory
from platekit.data._padding import check_sequences, describe_rule, pad_rows
from platekit.data._ranges import training_range
from platekit.data._sampling import EpochBatchSampler, InOrderBatchSampler, TensorPairs
from platekit.settings import Range

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")
ALL = "all"  # every row in read order: a fingerprint's name beside the splits'
NORMALIZE = ("scalar", "channel", "feature", "none")
TARGET_KINDS = ("class", "value")
BLOCK_VALUES = 1 << 18  # about this many values (2 MiB in float64) summed at a time
Batch = tuple[Tensor, Tensor]


@dataclass
class Rows:
    """What :meth:`BaseDataModule.read` returns: every raw row of the data.

    Args:
        inputs: ``(N, *input_shape)`` float tensor of raw inputs, or a sequence of ``N``
            items (e.g. file paths) that :meth:`BaseDataModule.decode` turns into tensors.
        targets: ``(N,)`` int64 class indices, or float32 values for a regression target.
        class_names: the name of each class index; empty for real-valued targets.
    """

    inputs: Tensor | Sequence[Any]
    targets: Tensor
    class_names: Sequence[str] = ()

    def __len__(self) -> int:
        return len(self.targets)


class BaseDataModule(LightningDataModule):
    """The generic half of every data module; a subclass implements :meth:`read`.

    Args:
        batch_size: training batch size (per process under DDP).
        eval_batch_size: batch size of validation and test.
        val_fraction: share of the rows held out for validation (when ``read`` gives no
            validation split of its own).
        test_fraction: share held out for the test (when ``read`` gives no test split).
        seed: fixes the split, the order of every epoch and each sample's augmentation.
        num_workers: DataLoader worker processes; 0 slices in-memory tensors directly.
        normalize: statistics of the train split to normalise with: ``scalar`` (one mean
            and std), ``channel`` (per channel of ``(C, H, W)`` inputs), ``feature`` (per
            element of the input, e.g. per column of a table) or ``none``.
        skip_bad_files: inputs read from files (an image folder's) that fail to decode are
            left out, each named in a line; false: the run stops naming them all.
    """

    hparams: AttributeDict  # what save_hyperparameters() stores (Lightning types it loosely)

    input_name = "inputs"  # what the exported model calls its input; subclasses rename it
    padding_value = 0.0  # what fills a sequence past its end (with varying_axes)

    def __init__(
        self,
        batch_size: Annotated[int, Range(low=1)] = 64,
        eval_batch_size: Annotated[int, Range(low=1)] = 512,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        seed: Annotated[int, Range(0, 2**32 - 1)] = 0,
        num_workers: Annotated[int, Range(low=0)] = 0,
        normalize: str = "scalar",
        skip_bad_files: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # the subclass's arguments too: they rebuild it
        plain_settings(self)
        self.rows: Rows | None = None
        self.parts: dict[str, Tensor] = {}  # each split's row indices into self.rows
        self.mean = torch.zeros(())
        self.std = torch.ones(())
        self._info: DataInfo | None = None
        self._row_hashes: np.ndarray | None = None  # a hash per row of tensor inputs
        self._item_fingerprints: dict[str, dict[str, Any]] = {}
        self._given_statistics: tuple[Tensor, Tensor] | None = None
        self.train_sampler: EpochBatchSampler | None = None
        self._train_sampler_state: dict[str, int] | None = None  # from a checkpoint

    # ---- what a subclass implements -------------------------------------------------------

    @abstractmethod
    def read(self) -> Rows | dict[str, Rows]:
        """All raw rows, or a dict of given splits (``train`` and ``test``, ``val`` optional).

        Called once, at setup: check paths here, not in ``__init__``, so configs compose
        without the files.
        """

    def decode(self, item: Any) -> Tensor:
        """One raw input from one of ``Rows.inputs`` when those are not tensors (e.g. a path)."""
        raise NotImplementedError(f"{type(self).__name__}.read() gave items; define decode()")

    def decode_or_name(self, item: Any) -> Tensor:
        """:meth:`decode` during training: a file that fails now (it decoded at setup, so it
        changed since) ends the run in one line naming it."""
        try:
            return self.decode(item)
        except Exception as error:  # what a decoder raises is its own
            raise UserError(
                f"{inert(item)} cannot be read any more ({first_line(error, 120)}); it was read "
                "at the start of the run, so it changed since: restore it and resume "
                "(ckpt_path=last), or leave it out with data.skip_bad_files=true in a new run"
            ) from None

    def augment(self, sample: Tensor, generator: torch.Generator) -> Tensor:
        """Training-time augmentation of one raw sample; draw randomness from ``generator``."""
        return sample

    @property
    def augments(self) -> bool:
        """Whether the train split is augmented (then it goes through the DataLoader path)."""
        return False

    def describe_input(self, info: DataInfo) -> str:
        """One sentence on what one input is: its shape, scale and meaning."""
        if info.varying_axes:
            return f"float32 {describe_rule(info)}: as {type(self).__name__}.read() gives them"
        shape = ", ".join(map(str, info.input_shape))
        return f"float32 (N, {shape}): raw inputs as {type(self).__name__}.read() gives them"

    def feature_names(self) -> tuple[str, ...]:
        """Tabular data: the name of each input feature, in order."""
        return ()

    def varying_axes(self) -> dict[int, int | None]:
        """Inputs whose size varies: axis of one input -> its largest allowed size (None: any).

        Sequences declare ``{0: 40}`` (a length of up to 40) and ``read`` gives
        ``Rows.inputs`` as a list of tensors of their own lengths: the base pads them with
        :attr:`padding_value` to the maximum (or the longest), export leaves that axis free
        and predict takes sequences of any allowed length. A step equal to the padding
        value ends a sequence, so the net can find each one's length (``padding.py``).
        """
        return {}

    def vocab_size(self) -> int | None:
        """Token inputs: the number of token ids (the padding id included); None otherwise."""
        return None

    @classmethod
    def make_fixture(cls, directory: Path) -> dict[str, Any] | None:
        """Write a small data set under ``directory`` for the contract tests.

        Return the ``data.*`` settings that point the module at it (``{}`` when it needs no
        files), or ``None`` to have the contract tests skip this data module.
        """
        return None

    # ---- setup ------------------------------------------------------------------------------

    def setup(self, stage: str | None = None) -> None:
        if self.rows is not None:
            return
        with return_freed_memory():  # the temporaries of reading and statistics given back
            self._set_up()

    def _set_up(self) -> None:
        """Read and split the rows, then learn from the train split alone what a model and
        its export need: the normalizing statistics, the input range and the ``DataInfo``."""
        check_settings(self.hparams)
        rows, parts = self._split(self.read())
        if self.varying_axes():
            rows = self._padded(rows)
        check_rows(type(self).__name__, rows, parts)
        self.rows, self.parts = rows, parts
        decoded = None if isinstance(rows.inputs, Tensor) else self._decode_every_item()
        # The train split's rows, a block at a time: no copy of the split is made.
        train: tuple[Tensor, Tensor | None]
        if self._given_statistics is None:
            if decoded is not None:
                train = (decoded, None)
            else:
                assert isinstance(rows.inputs, Tensor)  # items to decode came back decoded
                train = (rows.inputs, parts["train"])
            self.mean, self.std = statistics(train[0], train[1], self.hparams.normalize)
        else:  # a checkpoint's: no need to decode the train split (an evaluation)
            train = (self.raw_inputs("train", limit=64), None)
            self.mean, self.std = self._given_statistics
        info = DataInfo(
            input_shape=tuple(train[0].shape[1:]),
            target_kind="class" if rows.class_names else "value",
            class_names=tuple(rows.class_names),
            input_name=self.input_name,
            feature_names=self.feature_names(),
            background=border_mean(*train),
            split_sizes={name: len(index) for name, index in parts.items()},
            input_range={}
            if self._given_statistics is not None
            else training_range(
                (block.numpy() for block in row_blocks(*train)),
                varying=bool(self.varying_axes()),
            ),
            **self._varying_info(),
        )
        self._info = DataInfo(**{**info.__dict__, "input_description": self.describe_input(info)})
        sizes = ", ".join(f"{name} {len(index)}" for name, index in parts.items())
        log.debug("data: %s (%s)", type(self).__name__, sizes)  # train's header shows them

    @property
    def info(self) -> DataInfo:
        """The data's metadata; the data module must be set up."""
        if self._info is None:
            self.setup()
        assert self._info is not None
        return self._info

    def normalise(self, inputs: Tensor) -> Tensor:
        """Raw inputs ``(B, *input_shape)`` as the model sees them."""
        return (inputs - self.mean) / self.std

    def raw_inputs(self, split: str, limit: int | None = None) -> Tensor:
        """The first ``limit`` (default: all) raw inputs of ``split``: the shipped model's input."""
        assert self.rows is not None, "set the data module up first"
        index = self.parts[split][:limit]
        if isinstance(self.rows.inputs, Tensor):
            return self.rows.inputs[index]
        return torch.stack([self.decode(self.rows.inputs[i]) for i in index.tolist()])

    def targets(self, split: str) -> Tensor:
        assert self.rows is not None, "set the data module up first"
        return self.rows.targets[self.parts[split]]

    def fingerprint(self, split: str) -> dict[str, Any]:
        """Row count and digests of ``split``'s rows in order (``fingerprint.py``), or of
        every row (``all``); reads only that split's items (an image folder's files)."""
        assert self.rows is not None, "set the data module up first"
        index = self.parts[split] if split != ALL else torch.arange(len(self.rows))
        if isinstance(self.rows.inputs, Tensor):  # every row hashed once, in memory
            if self._row_hashes is None:
                self._row_hashes = fingerprint.tensor_row_hashes(
                    self.rows.inputs, self.rows.targets
                )
            if split == ALL:  # in read order: the hashes themselves, no copy
                return fingerprint.of_hashes(self._row_hashes)
            return fingerprint.of_hashes(self._row_hashes[index.numpy()])
        if split not in self._item_fingerprints:
            items = [self.rows.inputs[i] for i in index.tolist()]
            hashes = fingerprint.item_row_hashes(items, self.rows.targets[index], self.item_bytes)
            self._item_fingerprints[split] = fingerprint.of_hashes(hashes)
        return self._item_fingerprints[split]

    def use_statistics(self, mean: Tensor, std: Tensor) -> None:
        """Normalise with ``mean`` and ``std`` (a checkpoint's) instead of those of the train
        split read now: an evaluation sees its rows as the trained model did. Before setup,
        setup then decodes no more of the train split than the input's shape needs."""
        self._given_statistics = (mean, std)
        self.mean, self.std = mean, std

    def item_bytes(self, item: Any) -> bytes:
        """What identifies one of ``Rows.inputs`` that is not a tensor: a file's bytes, or
        its decoded tensor's. Override for items that are neither."""
        if isinstance(item, str | Path) and Path(item).is_file():
            return Path(item).read_bytes()
        return self.decode(item).detach().cpu().float().contiguous().numpy().tobytes()

    def split_tensors(self, split: str) -> TensorPairs:
        """Normalised inputs and targets of ``split`` in memory (for benchmarks and tests)."""
        return TensorPairs(self.normalise(self.raw_inputs(split)), self.targets(split))

    def _decode_every_item(self) -> Tensor | None:
        """Decode every item of every split once, before anything trains: a file that fails
        (a truncated JPEG with a valid header) would otherwise end the run at the sanity
        check, or after training in the test. Every bad file is reported in one line, or,
        with ``skip_bad_files``, left out of its split with a line naming each. Returns the
        train split's decoded inputs (its statistics need them); an evaluation, given the
        checkpoint's statistics, decodes only the test split.
        """
        assert self.rows is not None
        splits = ["test"] if self._given_statistics is not None else list(self.parts)
        bad: list[tuple[str, int, str]] = []
        train: list[Tensor] = []
        for split in splits:
            for row in self.parts[split].tolist():
                try:
                    sample = self.decode(self.rows.inputs[row])
                except Exception as error:  # what a decoder raises is its own; each is named
                    bad.append((split, row, first_line(error, 120)))
                    continue
                if split == "train":
                    train.append(sample)
        if bad:
            named = [f"{inert(self.rows.inputs[row])} ({split}: {why})" for split, row, why in bad]
            if not self.hparams.skip_bad_files:
                listed = "; ".join(named[:5]) + (
                    f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
                )
                raise UserError(
                    f"{len(bad)} file(s) of the data cannot be read: {listed}; fix or remove "
                    "them, or leave them out with data.skip_bad_files=true"
                )
            for line in named:
                log.warning("data.skip_bad_files: left out %s", line)
            dropped = {row for _, row, _ in bad}
            self.parts = {
                split: index[[row not in dropped for row in index.tolist()]]
                for split, index in self.parts.items()
            }
            check_rows(type(self).__name__, self.rows, self.parts)  # no split left empty
        return torch.stack(train) if train and "train" in splits else None

    def _varying_info(self) -> dict[str, Any]:
        """The ``DataInfo`` fields of variable-length inputs (none for inputs of one size)."""
        if not self.varying_axes():
            return {}
        return {
            "varying_axes": dict(self.varying_axes()),
            "padding_value": float(self.padding_value),
            "vocab_size": self.vocab_size(),
        }

    def _padded(self, rows: Rows) -> Rows:
        """Rows whose inputs are sequences of their own lengths, as one padded tensor.

        Each sequence is checked as predict checks a user's (length, padding, tokens), and
        padded to the declared maximum, or to the longest when there is none.
        """
        name, axes = type(self).__name__, self.varying_axes()
        if self.hparams.normalize != "none":
            raise UserError(
                f"data.normalize={self.hparams.normalize}: {name}'s inputs vary in length, and "
                "padding would enter the statistics; set data.normalize=none"
            )
        items = rows.inputs
        if not isinstance(items, Tensor) and not all(isinstance(i, Tensor) for i in items):
            raise UserError(
                f"{name}.read() gave items to decode, but its inputs vary in length: give "
                "the sequences as tensors (Rows.inputs = [tensor, ...])"
            )
        sequences = [items] if isinstance(items, Tensor) else [item[None] for item in items]
        ranks = {sequence.ndim - 1 for sequence in sequences}
        (axis, limit), rank = next(iter(axes.items())), max(ranks)
        if len(ranks) > 1 or not 0 <= axis < rank or len(axes) > 1:
            raise UserError(
                f"{name}: varying_axes {axes} does not fit its inputs of {sorted(ranks)} "
                "dimensions; declare one axis of one input, e.g. {0: 40}"
            )
        shape = list(sequences[0].shape[1:])
        shape[axis] = 1  # any length: what check_sequences compares are the other sizes
        info = DataInfo(input_shape=tuple(shape), target_kind="value", **self._varying_info())
        as_numpy = [sequence.detach().float().numpy() for sequence in sequences]
        try:
            padded, lengths = pad_rows(as_numpy, info)
            given = None if isinstance(items, Tensor) else lengths  # padded already: read it
            checked = check_sequences(padded, given, info, f"{name}.read()")
        except ValueError as error:  # the rows' other sizes differ from one another
            raise UserError(f"{name}.read() gave inputs of different shapes ({error})") from None
        inputs = torch.from_numpy(checked)
        size = limit if limit is not None else inputs.shape[axis + 1]
        width = [0, 0] * (inputs.ndim - axis - 2) + [0, size - inputs.shape[axis + 1]]
        inputs = torch.nn.functional.pad(inputs, width, value=float(self.padding_value))
        return Rows(inputs, rows.targets, rows.class_names)

    def _split(self, read: Rows | dict[str, Rows]) -> tuple[Rows, dict[str, Tensor]]:
        """All rows in one ``Rows`` and each split's indices into it."""
        if isinstance(read, Rows):
            return read, self._seeded_split(len(read))
        if not {"train", "test"} <= read.keys() or not read.keys() <= set(SPLITS):
            raise UserError(
                f"{type(self).__name__}.read() returned splits {sorted(read)}; return Rows, "
                "or a dict with 'train' and 'test' (and optionally 'val')"
            )
        names = [name for name in SPLITS if name in read]
        rows = concatenate([read[name] for name in names])
        starts = torch.tensor([0, *(len(read[name]) for name in names)]).cumsum(0)
        parts = {
            name: torch.arange(int(starts[i]), int(starts[i + 1])) for i, name in enumerate(names)
        }
        if "val" not in parts:  # carved from the given train split, seeded
            train = parts["train"]
            order = train[self._permutation(len(train))]
            n_val = round(len(train) * self.hparams.val_fraction)
            parts = {"train": order[n_val:], "val": order[:n_val], "test": parts["test"]}
        return rows, parts

    def _seeded_split(self, size: int) -> dict[str, Tensor]:
        order = self._permutation(size)
        n_val = round(size * self.hparams.val_fraction)
        n_test = int(size * self.hparams.test_fraction)
        n_train = size - n_val - n_test
        return dict(zip(SPLITS, order.split([n_train, n_val, n_test]), strict=True))

    def _permutation(self, size: int) -> Tensor:
        return torch.randperm(size, generator=torch.Generator().manual_seed(self.hparams.seed))

    # ---- loaders ----------------------------------------------------------------------------

    def train_dataloader(self) -> Iterable[Batch]:
        return self._loader("train", self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> Iterable[Batch]:
        return self._loader("val", self.hparams.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> Iterable[Batch]:
        return self._loader("test", self.hparams.eval_batch_size, shuffle=False)

    def _loader(self, split: str, batch_size: int, *, shuffle: bool) -> Iterable[Batch]:
        """The batches of ``split`` for this rank: sliced from memory on the device when the
        rows are one tensor and no worker is asked for, else read by a DataLoader. The train
        split's sampler carries the state a mid-epoch resume restores."""
        trainer = self.trainer
        per_sample = self.rows is not None and not isinstance(self.rows.inputs, Tensor)
        per_sample |= shuffle and self.augments
        workers = self.hparams.num_workers
        # overfit_batches: the same first batches every epoch, as Lightning's own loaders do
        overfit = trainer is not None and getattr(trainer, "overfit_batches", 0) > 0
        sampler = (EpochBatchSampler if shuffle and not overfit else InOrderBatchSampler)(
            len(self.parts[split]),
            batch_size,
            shuffle=shuffle,
            seed=self.hparams.seed,
            rank=trainer.global_rank if trainer else 0,
            world_size=trainer.world_size if trainer else 1,
            with_epoch=per_sample or workers > 0,
        )
        if shuffle:  # the train split: its sampler holds the resume state
            if self._train_sampler_state is not None:
                sampler.load_state_dict(self._train_sampler_state)
                self._train_sampler_state = None
            self.train_sampler = sampler
        device = trainer.strategy.root_device if trainer else torch.device("cpu")
        if workers == 0 and not per_sample:
            assert self.rows is not None
            assert isinstance(self.rows.inputs, Tensor)
            rows = SplitRows(
                self.rows.inputs, self.rows.targets, self.parts[split], self.mean, self.std
            )
            return in_memory_loader(rows, sampler, device)
        dataset = SplitSamples(self, split, train=shuffle)
        return ResumableDataLoader(
            dataset,
            sampler=sampler,
            batch_size=None,  # the sampler yields whole batches of indices
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=device.type == "cuda",
            worker_init_fn=ignore_interrupts if workers > 0 else None,
            # Its own generator: a DataLoader otherwise draws its workers' base seed from
            # the global RNG, which would shift dropout's draws between a run and its resume.
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

    # ---- checkpoint state -------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        # The split and its statistics follow from the settings, which the checkpoint's
        # data card holds; what a resume needs here is the sampler's position.
        if self.train_sampler is None:
            return {}
        return {"train_sampler": self.train_sampler.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Applied when the train loader is built, before Lightning first iterates it.
        self._train_sampler_state = state_dict.get("train_sampler")


class SplitSamples(Dataset[Batch]):
    """One split, sample by sample: decode, augment (train only), normalise, stack.

    Indexed by ``(epoch, indices)`` as the sampler yields them, so each sample's
    augmentation draws from a generator seeded by ``(seed, epoch, dataset index)``: the
    same in every run, whichever worker handles it and wherever a run resumed.
    """

    def __init__(self, source: BaseDataModule, split: str, *, train: bool) -> None:
        assert source.rows is not None
        self.source = source
        self.rows = source.rows
        self.index = source.parts[split]
        self.augment = train and source.augments
        self.seed = int(source.hparams.seed)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key: tuple[int, Tensor]) -> Batch:
        epoch, positions = key
        rows = self.index[positions]
        if isinstance(self.rows.inputs, Tensor) and not self.augment:  # a batch at once
            return self.source.normalise(self.rows.inputs[rows]), self.rows.targets[rows]
        samples = []
        for row in rows.tolist():
            item = self.rows.inputs[row]
            sample = item if isinstance(item, Tensor) else self.source.decode_or_name(item)
            if self.augment:
                sample = self.source.augment(sample, sample_generator(self.seed, epoch, row))
            samples.append(sample)
        inputs = self.source.normalise(torch.stack(samples))
        return inputs, self.rows.targets[rows]


def plain_settings(module: LightningDataModule) -> None:
    """Make the saved settings plain Python: Hydra passes list and dict settings (e.g.
    ``features=[a,b]``) as OmegaConf containers, which no checkpoint may hold."""
    for settings in (module.hparams, getattr(module, "_hparams_initial", {})):
        for key, value in settings.items():
            settings[key] = to_plain(value)


def sample_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A generator whose draws depend on ``(seed, epoch, index)`` only."""
    mixed = (seed * 1_000_003 + epoch) * 1_000_000_007 + index
    return torch.Generator().manual_seed(mixed % (2**63 - 1))


def ignore_interrupts(worker_id: int) -> None:
    """DataLoader workers leave Ctrl-C to the main process, which stops them cleanly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def row_blocks(inputs: Tensor, index: Tensor | None = None) -> Iterator[Tensor]:
    """``inputs[index]`` (all of ``inputs`` without ``index``) a block of rows at a time."""
    rows = max(1, BLOCK_VALUES // max(math.prod(inputs.shape[1:]), 1))
    if index is None:
        yield from inputs.split(rows)
    else:
        for block in index.split(rows):
            yield inputs[block]


def statistics(inputs: Tensor, index: Tensor | None, normalize: str) -> tuple[Tensor, Tensor]:
    """Mean and std of the raw train inputs ``inputs[index]`` ``(N, *shape)``, broadcastable
    to one input, in float64 over blocks of rows (no copy of the split, none in float64)."""
    if normalize == "none":
        return torch.zeros(()), torch.ones(())
    ndim, shape = inputs.ndim, tuple(inputs.shape[1:])
    keep: tuple[int, ...]
    if normalize == "scalar":
        dims, keep = list(range(ndim)), ()
    elif normalize == "channel":
        if ndim < 3:
            raise UserError(
                f"data.normalize=channel needs (C, ...) inputs, got shape {shape}; use "
                "data.normalize=feature or scalar"
            )
        dims, keep = [0, *range(2, ndim)], (shape[0],) + (1,) * (ndim - 2)
    else:  # feature
        dims, keep = [0], shape
    rows = len(index) if index is not None else len(inputs)
    count = rows * math.prod(shape) // max(math.prod(keep), 1)
    total = torch.zeros((), dtype=torch.float64)
    for block in row_blocks(inputs, index):
        total = total + block.double().sum(dims)
    mean = total / count
    squares = torch.zeros((), dtype=torch.float64)
    for block in row_blocks(inputs, index):
        squares = squares + ((block.double() - mean.view(keep)) ** 2).sum(dims)
    std = (squares / max(count - 1, 1)).sqrt()
    std = torch.where(std > 1e-12, std, torch.ones_like(std))  # a constant feature stays 0
    return mean.float().view(keep), std.float().view(keep)


def border_mean(inputs: Tensor, index: Tensor | None = None) -> float | None:
    """Images ``(N, C, H, W)``: the mean raw value of the outermost pixels (the background)
    of ``inputs[index]`` (all of ``inputs`` without ``index``)."""
    if inputs.ndim != 4 or min(inputs.shape[-2:]) < 3:
        return None
    total, count = 0.0, 0
    for block in row_blocks(inputs, index):
        border = torch.cat(
            [
                block[..., 0, :].flatten(),
                block[..., -1, :].flatten(),
                block[..., 1:-1, 0].flatten(),
                block[..., 1:-1, -1].flatten(),
            ]
        )
        total += float(border.double().sum())
        count += border.numel()
    return round(total / count, 4) if count else None


def concatenate(parts: list[Rows]) -> Rows:
    names = [tuple(part.class_names) for part in parts]
    if len(set(names)) > 1:
        raise UserError(f"the given splits name different classes: {names}; use one class list")
    inputs: Tensor | list[Any]
    tensors = [part.inputs for part in parts if isinstance(part.inputs, Tensor)]
    if len(tensors) == len(parts):
        inputs = torch.cat(tensors)
    else:
        inputs = [item for part in parts for item in part.inputs]
    return Rows(inputs, torch.cat([part.targets for part in parts]), names[0])


def check_settings(hparams: Any) -> None:
    """Reject split and loader settings that cannot work, naming the fix."""
    total = hparams.val_fraction + hparams.test_fraction
    if not 0 < total < 1 or hparams.val_fraction < 0 or hparams.test_fraction < 0:
        raise UserError(
            f"data.val_fraction + data.test_fraction = {total} must be between 0 and 1 "
            "(each >= 0); lower them"
        )
    if hparams.normalize not in NORMALIZE:
        raise UserError(f"data.normalize={hparams.normalize} is not one of {', '.join(NORMALIZE)}")


def check_rows(name: str, rows: Rows, parts: dict[str, Tensor]) -> None:
    """Targets of the right type and range, finite inputs, no empty split."""
    targets = rows.targets
    if targets.ndim != 1 or len(rows.inputs) != len(targets):
        raise UserError(
            f"{name}.read() gave {len(rows.inputs)} inputs and targets of shape "
            f"{tuple(targets.shape)}; give one target per input, shape (N,)"
        )
    if rows.class_names:
        if targets.dtype != torch.int64:
            raise UserError(f"{name}.read(): class targets must be int64, got {targets.dtype}")
        bad = (targets < 0) | (targets >= len(rows.class_names))
        if bad.any():
            row = int(bad.nonzero()[0])
            raise UserError(
                f"{name}.read(): row {row} has class {int(targets[row])}, outside the "
                f"{len(rows.class_names)} class_names; give a name for every class index"
            )
    elif not targets.is_floating_point():
        raise UserError(
            f"{name}.read() gave {targets.dtype} targets and no class_names; give class_names "
            "for a classification, or float targets for a regression"
        )
    for split, index in parts.items():
        if len(index) == 0:
            raise UserError(
                f"data split '{split}' is empty ({len(rows)} rows in all); add data or "
                "change data.val_fraction / data.test_fraction"
            )
    if isinstance(rows.inputs, Tensor):
        finite = torch.cat(  # by blocks: isfinite's temporaries are as large as its input
            [torch.isfinite(block).flatten(1).all(dim=1) for block in row_blocks(rows.inputs)]
        )
        for split, index in parts.items():
            check_finite(split, finite[index], index)
    if targets.is_floating_point():
        for split, index in parts.items():
            check_finite(f"{split} targets of", torch.isfinite(targets[index]), index)


def check_finite(split: str, finite: Tensor, rows: Tensor) -> None:
    """Raise a UserError naming the first row of ``split`` holding NaN or Inf (``finite``:
    per row of the split, whether all its values are finite)."""
    bad = ~finite
    if bad.any():
        first = int(bad.nonzero()[0])
        raise UserError(
            f"data split '{split}' row {first} (dataset index {int(rows[first])}) holds "
            f"NaN or Inf ({int(bad.sum())} bad rows in all); clean or drop those rows"
        )
