"""The project platekit's tests run on, and the runs several tests share.

The project is the template's own bake (default answers, plus serve=yes so every command is
there), made once per test session with cookiecutter into a temporary folder; or, with
``PLATEKIT_TEST_PROJECT=<folder>``, a project baked already (e.g. with another logger).
The baking process passes the folder on to pytest-xdist's workers in that variable.
"""

import atexit
import os
import shutil
import sys
import tempfile
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import torch

PROJECT_ENV = "PLATEKIT_TEST_PROJECT"
TEMPLATE = Path(__file__).resolve().parents[2]  # the template repository
TESTS = Path(__file__).resolve().parent


def bake_project() -> Path:
    """Bake the template into a temporary folder, removed when this process ends."""
    from cookiecutter.main import cookiecutter

    scratch = Path(tempfile.mkdtemp(prefix="platekit-project-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    baked = cookiecutter(
        str(TEMPLATE), no_input=True, output_dir=str(scratch), extra_context={"serve": "yes"}
    )
    return Path(baked).resolve()


def project_root() -> Path:
    given = os.environ.get(PROJECT_ENV)
    root = Path(given).resolve() if given else bake_project()
    if not (root / "src").is_dir() or not (root / "configs").is_dir():
        raise pytest.UsageError(f"{PROJECT_ENV}={root} is not a baked project (src/, configs/)")
    os.environ[PROJECT_ENV] = str(root)  # workers started after this use the same bake
    return root


ROOT = project_root()
PACKAGE = next(p.name for p in sorted((ROOT / "src").iterdir()) if (p / "__init__.py").is_file())
os.environ["CONFIG_DIR"] = str(ROOT / "configs")
for path in (str(TESTS), str(ROOT / "src")):
    if path not in sys.path:
        sys.path.insert(0, path)
import_module(PACKAGE)  # sets the current platekit project

# Two threads per process oversubscribe a 2-core machine when tests run alongside others.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

from support import QUICK, compose_config, module  # noqa: E402  (after the project is set)


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
