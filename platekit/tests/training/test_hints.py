"""Failures people hit become one line naming the setting to change; real errors, real runs."""

import os
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from support import compose_config, module

UserError = module("_errors").UserError
explain_failures = module("training._hints").explain_failures
train = module("train")

QUICK_RUN = ["debug=fast_dev_run", "callbacks.progress_bar=null", "trainer.accelerator=cpu"]


def test_net_sized_for_other_data_is_refused_before_training(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = compose_config(run_dir, [*QUICK_RUN, "model=mlp", "+model.net.input_shape=[32]"])
    with pytest.raises(
        UserError,
        match=r"model\.net\.input_shape=\[32\] does not fit the data, whose input_shape is "
        r"\[1, 8, 8\]; remove model\.net\.input_shape",
    ):
        train.train(cfg)
    assert not run_dir.exists()  # refused before the run wrote anything


def test_net_whose_own_size_does_not_fit_names_both_sizes(tmp_path: Path) -> None:
    # A user's net with a fixed input width, not taken from the data.
    cfg = compose_config(
        tmp_path,
        [
            *QUICK_RUN,
            "model.net._target_=torch.nn.Linear",
            "+model.net.in_features=32",
            "+model.net.out_features=10",
            "~model.net.channels",
            "~model.net.dropout",
        ],
    )
    with pytest.raises(
        UserError, match=r"model\.net Linear cannot take the data's inputs of shape \(1, 8, 8\)"
    ):
        train.train(cfg)


def test_num_classes_other_than_the_data_names_both_numbers(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*QUICK_RUN, "+model.task.num_classes=5"])
    with pytest.raises(
        UserError,
        match=r"model\.task\.num_classes=5 but the data has 10 classes \(0, 1, .*"
        r"remove model\.task\.num_classes",
    ):
        train.train(cfg)


def test_out_of_memory_gives_current_batch_and_accumulation(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["data.batch_size=64", "trainer.accumulate_grad_batches=2"])
    with pytest.raises(UserError) as caught, explain_failures(cfg):
        torch.empty(2**60, dtype=torch.uint8)  # more memory than any machine has
    message = str(caught.value)
    assert "data.batch_size=64 and trainer.accumulate_grad_batches=2" in message
    assert "data.batch_size=32 trainer.accumulate_grad_batches=4" in message


def test_device_mismatch_says_to_register_buffers(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path)
    with (
        pytest.raises(UserError, match=r"different devices .*register_buffer"),
        explain_failures(cfg),
    ):
        torch.nn.Linear(2, 2)(torch.ones(1, 2, device="meta"))


class DiesInWorker(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        os._exit(1)  # a worker killed, as by the OOM killer or a full /dev/shm


@pytest.mark.slow
def test_dataloader_workers_that_die_suggest_num_workers_zero(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["data.num_workers=1"])
    expected = r"data\.num_workers=1 .*set data\.num_workers=0"
    with pytest.raises(UserError, match=expected), explain_failures(cfg):
        list(DataLoader(DiesInWorker(), num_workers=1))


def test_other_errors_pass_through(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not ours"), explain_failures(compose_config(tmp_path)):
        raise ValueError("not ours")
