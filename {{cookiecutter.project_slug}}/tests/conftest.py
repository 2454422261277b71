"""Fixtures: one short real training run shared by the tests that inspect its outputs."""

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from support import QUICK, compose_config, module

# Two threads per process oversubscribe a 2-core machine when tests run alongside others.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Train the default model for 3 epochs once; return its metrics and run directory."""
    run_dir: Path = tmp_path_factory.mktemp("trained")
    cfg = compose_config(run_dir, QUICK)
    metrics = module("train").train(cfg)
    return {"metrics": metrics, "run_dir": run_dir, "cfg": cfg}


@pytest.fixture(scope="session")
def exported(trained: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Export the trained run's best checkpoint to ONNX once; return its report and paths."""
    out_dir: Path = tmp_path_factory.mktemp("exported")
    checkpoint = trained["metrics"]["best_checkpoint"]
    cfg = compose_config(out_dir, [f"ckpt_path={checkpoint}", "repeats=3"], config_name="export")
    report = module("export").export(cfg)
    return {"report": report, "dir": out_dir, "model": out_dir / "model.onnx", "ckpt": checkpoint}
