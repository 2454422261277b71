"""This project under test, and one short real training run that several tests inspect.

The helpers (``platekit.testing``) work on the current platekit project, which importing
this package sets; the package is found from ``src/`` so no test names it.
"""

import os
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import torch
from platekit.testing import QUICK, compose_config, loss_logging, project_module

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = next(p.name for p in sorted((ROOT / "src").iterdir()) if (p / "__init__.py").is_file())
import_module(PACKAGE)  # makes this project platekit's current one

# Two threads per process oversubscribe a 2-core machine when tests run alongside others.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

# The shared run: 3 epochs, a last.ckpt every 10 steps and each step's loss logged, so the
# resume tests compare an interrupted run against it.
RUN = [
    *QUICK,
    "callbacks.early_stopping=null",
    "callbacks.model_checkpoint.last_every_n_steps=10",
]


def train_run(run_dir: Path, *overrides: str) -> dict[str, Any]:
    """Train with RUN and ``overrides`` into ``run_dir``, each step's loss in losses.txt."""
    cfg = compose_config(run_dir, [*RUN, *loss_logging(run_dir / "losses.txt"), *overrides])
    return project_module("train").train(cfg)


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The default model and data trained once for 3 epochs: its metrics and run directory."""
    run_dir = tmp_path_factory.mktemp("trained")
    return {"metrics": train_run(run_dir), "run_dir": run_dir}


@pytest.fixture(scope="session")
def exported(trained: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The trained run's best checkpoint exported to ONNX once: its report and paths."""
    out_dir = tmp_path_factory.mktemp("exported")
    checkpoint = trained["metrics"]["best_checkpoint"]
    cfg = compose_config(out_dir, [f"ckpt_path={checkpoint}", "repeats=3"], config_name="export")
    report = project_module("export").export(cfg)
    return {"report": report, "dir": out_dir, "model": out_dir / "model.onnx", "ckpt": checkpoint}
