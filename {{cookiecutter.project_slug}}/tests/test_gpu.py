"""The GPU tier: real training on CUDA. Skipped where no CUDA device is visible.

Run it with ``pytest -m gpu -s`` to see the throughput and memory it prints.
"""

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from support import PACKAGE, ROOT, compose_config, module, read_json

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason=f"no CUDA device visible (torch {torch.__version__}, "
        f"{'CPU-only build' if torch.version.cuda is None else 'CUDA ' + torch.version.cuda})",
    ),
]

ON_GPU = ["trainer=gpu", "callbacks.progress_bar=null", "trainer.max_epochs=5"]


def train_on_gpu(run_dir: Path, *overrides: str) -> dict[str, Any]:
    """Train on CUDA; print steps/s and peak memory; return the metrics."""
    torch.cuda.reset_peak_memory_stats()
    metrics = module("train").train(compose_config(run_dir, [*ON_GPU, *overrides]))
    peak = torch.cuda.max_memory_allocated() / 2**20
    rate = metrics["steps"] / metrics["fit_seconds"]
    print(
        f"\n[gpu] {torch.cuda.get_device_name()} {metrics['precision']}: "
        f"{rate:.0f} steps/s, peak memory {peak:.1f} MiB, "
        f"test accuracy {metrics['test']['test/acc']:.4f}"
    )
    return metrics


def final_train_loss(run_dir: Path) -> float:
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        return [float(r["train/loss"]) for r in csv.DictReader(handle) if r["train/loss"]][-1]


def test_bf16_mixed_smoke_training(tmp_path: Path) -> None:
    if not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip(f"{torch.cuda.get_device_name()} has no native bfloat16")
    metrics = train_on_gpu(tmp_path, "trainer.precision=bf16-mixed")
    assert metrics["precision"] == "bf16-mixed"
    assert metrics["test"]["test/acc"] > 0.9


def test_auto_precision_agrees_with_fp32(tmp_path: Path) -> None:
    amp = train_on_gpu(tmp_path / "amp", "trainer.precision=auto")
    fp32 = train_on_gpu(tmp_path / "fp32", "trainer.precision=32-true")
    assert amp["precision"] in ("bf16-mixed", "16-mixed")
    assert fp32["precision"] == "32-true"
    loss_amp, loss_fp32 = final_train_loss(tmp_path / "amp"), final_train_loss(tmp_path / "fp32")
    print(f"[gpu] final train loss: {amp['precision']} {loss_amp:.4f}, 32-true {loss_fp32:.4f}")
    assert loss_amp == pytest.approx(loss_fp32, abs=0.05, rel=0.25)
    assert amp["test"]["test/acc"] == pytest.approx(fp32["test"]["test/acc"], abs=0.03)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DDP on GPUs needs 2 or more visible")
def test_ddp_on_all_visible_gpus(tmp_path: Path) -> None:
    # A subprocess: Lightning re-launches the running script for the other ranks.
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", "trainer=ddp", *ON_GPU[1:],
         f"paths.root_dir={tmp_path}"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    metrics = read_json(run_dir / "metrics.json")
    print(f"\n[gpu] ddp on {metrics['world_size']} GPUs: {metrics['fit_seconds']} s fit")
    assert metrics["world_size"] == torch.cuda.device_count()
    assert metrics["test"]["test/acc"] > 0.9
