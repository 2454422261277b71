"""Exact resume: an interrupted and resumed run ends bitwise equal to an uninterrupted one.

Compared with the shared 3-epoch run (conftest.py): every tensor of the final checkpoint
(weights, buffers, optimizer moments) and the loss of every training step, resumed at an
epoch boundary and mid-epoch, with num_workers 0 and 2.
"""

from pathlib import Path
from typing import Any

import pytest
import torch
from platekit.testing import (
    CrashError,
    crash_after,
    differing_tensors,
    step_losses,
    stop_after_epoch,
)

from conftest import train_run

STEPS_PER_EPOCH = 20  # 1258 train rows in batches of 64


def resume(run_dir: Path, *overrides: str) -> None:
    train_run(run_dir, *overrides, f"ckpt_path={run_dir}/checkpoints/last.ckpt")


def assert_same_run(resumed: Path, reference: Path) -> None:
    assert differing_tensors(resumed, reference) == []
    losses = step_losses(reference / "losses.txt")
    assert len(losses) == 3 * STEPS_PER_EPOCH
    assert step_losses(resumed / "losses.txt") == losses  # steps run twice: the later value


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_resume_mid_epoch_from_step_checkpoint_is_exact(
    workers: int, trained: dict[str, Any], tmp_path: Path
) -> None:
    loader = f"data.num_workers={workers}"
    with pytest.raises(CrashError):
        train_run(tmp_path, loader, *crash_after(35))
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 30  # the last periodic checkpoint: epoch 1, batch 10
    assert checkpoint["DigitsDataModule"]["train_sampler"] == {"epoch": 1, "skip": 10}
    resume(tmp_path, loader)  # steps 31-35 run again, and must give the same values
    assert_same_run(tmp_path, trained["run_dir"])


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_resume_at_epoch_boundary_is_exact(
    workers: int, trained: dict[str, Any], tmp_path: Path
) -> None:
    loader = f"data.num_workers={workers}"
    train_run(tmp_path, loader, *stop_after_epoch(0))
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == STEPS_PER_EPOCH
    resume(tmp_path, loader)
    assert_same_run(tmp_path, trained["run_dir"])
