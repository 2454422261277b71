"""The data contract's base, on the project's digits: shapes, fixed splits, train-only
statistics, replayable order."""

from pathlib import Path

import numpy as np
import pytest
import torch

from support import module, project_module, write_image_folder

data = module("data")
DigitsDataModule = project_module("data").DigitsDataModule  # the test project's data
sampling = module("data._sampling")
UserError = module("_errors").UserError


@pytest.fixture(scope="module")
def digits() -> DigitsDataModule:
    datamodule = DigitsDataModule(seed=0)
    datamodule.setup("fit")
    return datamodule


def test_split_sizes_and_shapes(digits: DigitsDataModule) -> None:
    sizes = {name: len(digits.split_tensors(name)) for name in ("train", "val", "test")}
    assert sizes == {"train": 1258, "val": 270, "test": 269}
    assert digits.info.input_shape == (1, 8, 8)
    assert digits.info.class_names == tuple("0123456789")
    inputs, targets = next(iter(digits.train_dataloader()))
    assert inputs.shape == (64, 1, 8, 8)
    assert inputs.dtype == torch.float32
    assert targets.shape == (64,)
    assert targets.dtype == torch.int64
    assert set(targets.tolist()) <= set(range(10))


def test_splits_do_not_overlap(digits: DigitsDataModule) -> None:
    rows = {
        name: {tuple(x.flatten().tolist()) for x in digits.split_tensors(name).inputs}
        for name in ("train", "val", "test")
    }
    # digits has a few duplicate images; overlap between splits must be no more than that
    raw = digits.read().inputs
    duplicates = len(raw) - len({tuple(x.flatten().tolist()) for x in raw})
    assert len(rows["train"] & rows["val"]) <= duplicates
    assert len(rows["train"] & rows["test"]) <= duplicates
    assert len(rows["val"] & rows["test"]) <= duplicates


def test_normalisation_comes_from_train_split_only(digits: DigitsDataModule) -> None:
    train = digits.split_tensors("train").inputs
    assert train.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert train.std().item() == pytest.approx(1.0, abs=1e-5)
    assert digits.split_tensors("val").inputs.mean().item() != pytest.approx(0.0, abs=1e-5)


def test_same_seed_same_split_other_seed_other_split() -> None:
    first, again, other = (DigitsDataModule(seed=s) for s in (0, 0, 1))
    for datamodule in (first, again, other):
        datamodule.setup()
    assert torch.equal(first.split_tensors("test").inputs, again.split_tensors("test").inputs)
    assert not torch.equal(first.targets("test"), other.targets("test"))


def test_nan_in_data_names_split_and_row(monkeypatch: pytest.MonkeyPatch) -> None:
    datamodule = DigitsDataModule(seed=0)
    rows = datamodule.read()
    rows.inputs[5, 0, 3, 3] = float("nan")
    monkeypatch.setattr(datamodule, "read", lambda: rows)
    with pytest.raises(UserError, match=r"data split '\w+' row \d+ \(dataset index 5\) holds NaN"):
        datamodule.setup()


def test_sampler_order_is_a_function_of_seed_and_epoch() -> None:
    def epoch_order(seed: int, epoch: int) -> list[int]:
        sampler = sampling.EpochBatchSampler(100, 16, shuffle=True, seed=seed)
        sampler.set_epoch(epoch)
        return torch.cat(list(sampler)).tolist()

    assert epoch_order(0, 3) == epoch_order(0, 3)
    assert epoch_order(0, 3) != epoch_order(0, 4)
    assert epoch_order(0, 3) != epoch_order(1, 3)
    assert sorted(epoch_order(0, 3)) == list(range(100))


def test_sampler_skips_consumed_batches_once() -> None:
    sampler = sampling.EpochBatchSampler(100, 16, shuffle=True, seed=0)
    full = list(sampler)
    sampler.load_state_dict({"epoch": 0, "skip": 4})
    resumed = list(sampler)
    assert [b.tolist() for b in resumed] == [b.tolist() for b in full[4:]]
    assert len(list(sampler)) == len(full)  # the skip applies to one epoch only


def test_sampler_shards_are_disjoint_and_equal_length() -> None:
    shards = [
        torch.cat(
            list(sampling.EpochBatchSampler(101, 8, shuffle=True, seed=0, rank=r, world_size=2))
        )
        for r in (0, 1)
    ]
    assert len(shards[0]) == len(shards[1]) == 51
    covered = set(shards[0].tolist()) | set(shards[1].tolist())
    assert covered == set(range(101))
    assert len(set(shards[0].tolist()) & set(shards[1].tolist())) == 1  # the one padding index


@pytest.mark.parametrize("ws", [2, 3, 4])
def test_an_evaluation_split_counts_each_row_once_in_equal_steps(ws: int) -> None:
    """Val and test under DDP: no padded row counted twice in their figures, every rank the
    same number of batches (none empty, none over the batch size)."""
    for size in range(ws, 80):
        for batch_size in (1, 2, 5, 16, 512):
            samplers = [
                sampling.InOrderBatchSampler(size, batch_size, seed=0, rank=r, world_size=ws)
                for r in range(ws)
            ]
            batches = [list(sampler) for sampler in samplers]
            assert {len(b) for b in batches} == {len(samplers[0])}, (size, batch_size)
            assert all(0 < len(batch) <= batch_size for b in batches for batch in b)
            rows = sorted(torch.cat([torch.cat(b) for b in batches]).tolist())
            if samplers[0].counts_each_row_once():
                assert rows == list(range(size)), (size, batch_size)
            else:  # too few rows per rank to cut into that many batches: padded
                assert set(rows) == set(range(size))
    assert sampling.InOrderBatchSampler(101, 512, seed=0, world_size=2).counts_each_row_once()


# sha256 of scikit-learn 1.9.1's sklearn/datasets/data/digits.csv.gz, decompressed
DIGITS_SHA256 = "6ebb3d2fee246a4e99363262ddf8a00a3c41bee6014c373ed9d9216ba7f651b8"


def test_digits_are_scikit_learns_table_shipped_in_platekit() -> None:
    """The bytes of scikit-learn 1.9.1's digits.csv.gz once decompressed, read as its loader
    reads them: 1,797 rows of 64 pixels in 0..16, then a label 0-9."""
    import gzip
    import hashlib

    shipped = module("data._examples").example_file("digits.csv.gz")
    text = gzip.decompress(shipped.read_bytes())
    assert hashlib.sha256(text).hexdigest() == DIGITS_SHA256
    pixels, labels = project_module("data.digits").read_digits()
    assert pixels.shape == (1797, 64)
    assert (pixels.min(), pixels.max()) == (0, 16)
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert pixels[0].reshape(8, 8)[1].tolist() == [0, 0, 13, 15, 10, 15, 5, 0]


def test_train_loader_yields_its_samplers_batches(digits: DigitsDataModule) -> None:
    loader = digits.train_dataloader()
    assert isinstance(loader.sampler, sampling.EpochBatchSampler)  # where Lightning looks
    assert len(loader) == 20
    twin = sampling.EpochBatchSampler(1258, 64, shuffle=True, seed=0)
    split = digits.split_tensors("train")
    for epoch in (0, 3):
        loader.sampler.set_epoch(epoch)
        twin.set_epoch(epoch)
        for (inputs, targets), index in zip(loader, twin, strict=True):
            assert torch.equal(inputs, split.inputs[index])
            assert torch.equal(targets, split.targets[index])


def test_train_loader_resumes_mid_epoch(digits: DigitsDataModule) -> None:
    loader = digits.train_dataloader()
    full = [targets for _, targets in loader]
    loader.sampler.load_state_dict({"epoch": 0, "skip": 15})
    resumed = [targets for _, targets in loader]
    assert len(resumed) == 5
    assert all(torch.equal(a, b) for a, b in zip(resumed, full[15:], strict=True))


def test_worker_loader_yields_the_same_batches_as_the_in_memory_one() -> None:
    in_memory, workers = DigitsDataModule(seed=0), DigitsDataModule(seed=0, num_workers=1)
    for datamodule in (in_memory, workers):
        datamodule.setup()
    batches = [list(dm.train_dataloader()) for dm in (in_memory, workers)]
    assert len(batches[0]) == len(batches[1]) == 20
    for (inputs, targets), (inputs_w, targets_w) in zip(*batches, strict=True):
        assert torch.equal(inputs, inputs_w)
        assert torch.equal(targets, targets_w)


@pytest.mark.parametrize("augment", [False, True], ids=["plain", "augmented"])
def test_cached_decoded_images_give_the_same_batches(tmp_path: Path, augment: bool) -> None:
    root = write_image_folder(tmp_path / "images", classes=3, per_class=12, size=10)
    options = {"root": str(root), "image_size": 8, "batch_size": 8, "seed": 0, "num_workers": 0}
    if augment:
        options |= {"crop_padding": 2, "flip": True}
    plain = data.ImageFolderDataModule(**options)
    cached = data.ImageFolderDataModule(**options, cache_decoded=True)
    for datamodule in (plain, cached):
        datamodule.setup()
    assert isinstance(cached.rows.inputs, torch.Tensor)  # decoded once, (N, C, H, W)
    assert tuple(cached.rows.inputs.shape) == (36, 3, 8, 8)
    assert torch.equal(plain.mean, cached.mean)
    assert torch.equal(plain.std, cached.std)
    loaders = plain.train_dataloader(), cached.train_dataloader()
    for epoch in (0, 1):  # augmentation differs per epoch, and must agree in each
        for loader in loaders:
            loader.sampler.set_epoch(epoch)
        for (inputs, targets), (inputs_c, targets_c) in zip(*loaders, strict=True):
            assert torch.equal(inputs, inputs_c)
            assert torch.equal(targets, targets_c)
    val = zip(plain.val_dataloader(), cached.val_dataloader(), strict=True)
    for (inputs, _), (inputs_c, _) in val:
        assert torch.equal(inputs, inputs_c)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")
def test_small_data_lives_on_the_gpu(tmp_path: Path) -> None:
    from lightning import Trainer

    datamodule = DigitsDataModule(seed=0)
    datamodule.setup()
    datamodule.trainer = Trainer(
        accelerator="gpu", devices=1, logger=False, default_root_dir=tmp_path
    )
    inputs, targets = next(iter(datamodule.train_dataloader()))
    assert inputs.device.type == targets.device.type == "cuda"  # no copy left for each step
