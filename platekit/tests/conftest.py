"""The project platekit's tests run on, and the runs several tests share.

The project is ``tests/project``: the parts of the template's default bake (serve=yes, so every
command is there) that a run reads, written by ``tools/fixture_project.py`` and checked equal to
a fresh bake by the template's tests. No cookiecutter here. ``PLATEKIT_TEST_PROJECT=<folder>``
runs the suite on a real bake instead (the template's ``make test`` does, with one), which also
runs the tests of a bake's own files (its tests, locks, vendored wheel); on the fixture those
skip, naming the variable.
"""

import atexit
import os
import shutil
import sys
import tempfile
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import torch

PROJECT_ENV = "PLATEKIT_TEST_PROJECT"

# Each command's config keys are declared by the modules that read them, imported by its
# process; a test that checks any command's config imports them all.
DECLARING = ["training._recipe", "commands._export", "commands._predict", "commands._bench"]
for _name in [*DECLARING, "sweeps._config", *(["commands._serve"] if find_spec("uvicorn") else [])]:
    import_module(f"platekit.{_name}")
TESTS = Path(__file__).resolve().parent
FIXTURE = TESTS / "project"


def copy_fixture() -> Path:
    """A copy of the fixture in a temporary folder (runs write outputs/ there), removed at exit."""
    scratch = Path(tempfile.mkdtemp(prefix="platekit-project-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "outputs")
    return Path(shutil.copytree(FIXTURE, scratch / "digits-classifier", ignore=ignore))


def project_root() -> Path:
    given = os.environ.get(PROJECT_ENV)
    root = Path(given).resolve() if given else copy_fixture()
    if not (root / "src").is_dir() or not (root / "configs").is_dir():
        raise pytest.UsageError(f"{PROJECT_ENV}={root} is not a baked project (src/, configs/)")
    os.environ[PROJECT_ENV] = str(root)  # workers started after this use the same copy
    return root


ROOT = project_root()
PACKAGE = next(p.name for p in sorted((ROOT / "src").iterdir()) if (p / "__init__.py").is_file())
os.environ["CONFIG_DIR"] = str(ROOT / "configs")
for path in (str(TESTS), str(ROOT / "src")):
    if path not in sys.path:
        sys.path.insert(0, path)
import_module(PACKAGE)  # sets the current platekit project
IS_BAKE = (ROOT / "requirements.lock").is_file()  # the fixture holds no locks or wheel


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On the fixture, skip the tests of a bake's own files (``@pytest.mark.bake``)."""
    if IS_BAKE:
        return
    skip = pytest.mark.skip(reason=f"checks a bake's own files: set {PROJECT_ENV}=<a bake>")
    for item in items:
        if item.get_closest_marker("bake"):
            item.add_marker(skip)


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
