"""Every combination of the options bakes, lints and passes the baked tests it can affect.

A covering set, because the options touch disjoint things:
- ``logger`` changes pyproject.toml's pins, the lock, configs/logger/ and the default in
  train.yaml. The bakes with wandb and mlflow (the loggers that add packages and a config)
  run the tests about loggers: the ``logger=...`` cases of the bake's test_configs.py
  (compose and build each), and platekit's test_logger.py with that bake as its project
  (``PLATEKIT_TEST_PROJECT``: every shipped logger, the default included, records a real
  run). csv and tensorboard ship in every bake, so platekit's own suite (test_platekit.py)
  already trains with both; a tensorboard bake differs from it only in the default, checked
  below. The rest of the tests run with logger=csv whatever the default (``QUICK`` in
  platekit.testing), so they cannot tell the loggers apart.
- ``ci`` and ``docker`` only add or drop files that no Python code or config reads: all 16
  combinations are baked and their file set, YAML, pins and lint checked here; the workflow
  and the Dockerfile themselves are linted in test_tooling.py.
- ``serve`` adds the server's files, its pins, a Makefile target and the Dockerfile's serving
  lines. It is not a fourth product factor: the 16 bakes above take serve=yes in half of
  them, so each logger, each ci and each docker answer is baked with both serve answers
  (and the lock with mlflow and serve together, which share pins). The server's tests are
  platekit's (platekit/tests/commands/test_serve.py); platekit's suite bakes serve=yes for them.
- ``python_version`` and ``license`` only change text (test_bake.py).
"""

import itertools
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from test_bake import expected_files, files_of

from conftest import TEMPLATE, bake, python_in, run, tail

LOGGERS = ["csv", "tensorboard", "wandb", "mlflow"]
# Pins that exist only for one logger.
LOGGER_PINS = {"wandb": {"wandb"}, "mlflow": {"mlflow-skinny", "sqlalchemy", "alembic"}}
# The server's own pins; the lock of an mlflow bake holds them too (mlflow serves with them).
SERVE_PINS = {"fastapi", "uvicorn"}
COMBINATIONS = [
    (logger, ci, docker, "yes" if (ci == "github") != (docker == "yes") else "no")
    for logger, ci, docker in itertools.product(LOGGERS, ["github", "none"], ["no", "yes"])
]

pytestmark = pytest.mark.slow


def pinned(path: Path) -> set[str]:
    return {
        name.lower()
        for name in re.findall(r'^\s*"?([A-Za-z0-9_.-]+)==', path.read_text(), re.MULTILINE)
    }


@pytest.mark.parametrize(("logger", "ci", "docker", "serve"), COMBINATIONS)
def test_combination_bakes_and_lints(
    logger: str, ci: str, docker: str, serve: str, tmp_path: Path
) -> None:
    project = bake(tmp_path, logger=logger, ci=ci, docker=docker, serve=serve)
    assert files_of(project) == expected_files(logger=logger, ci=ci, docker=docker, serve=serve)
    for path in project.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert "{{" not in path.read_text(errors="replace"), path
    for path in [*project.rglob("*.yaml"), *project.rglob("*.yml")]:
        yaml.safe_load(path.read_text())
    train = yaml.safe_load((project / "configs/train.yaml").read_text())
    assert {"logger": logger} in train["defaults"]
    for name in ("pyproject.toml", "requirements.lock"):
        pins = pinned(project / name)
        for owner, packages in LOGGER_PINS.items():
            assert (packages <= pins) == (owner == logger), f"{name}: {owner} pins"
        served = serve == "yes" or (name == "requirements.lock" and logger == "mlflow")
        assert (SERVE_PINS <= pins) == served, f"{name}: server pins"
    makefile = (project / "Makefile").read_text()
    assert ("\nserve: $(STAMP)" in makefile) == (serve == "yes")
    if docker == "yes":
        assert ("EXPOSE 8000" in (project / "Dockerfile").read_text()) == (serve == "yes")
    for args in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
        result = run(sys.executable, "-m", "ruff", *args, cwd=project)
        assert result.returncode == 0, tail(result)
    checked = run(sys.executable, "scripts/check_lock.py", cwd=project)  # its lock: its pins
    assert checked.returncode == 0, tail(checked)


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13"])
def test_every_python_bakes_a_declaration_its_lock_matches(python: str, tmp_path: Path) -> None:
    project = bake(tmp_path, python_version=python, logger="mlflow", serve="yes")
    settings = tomllib.loads((project / "pyproject.toml").read_text())
    assert settings["project"]["requires-python"] == f">={python}"
    declared = settings["project"]["dependencies"]
    assert "mlflow-skinny==3.17.2" in declared and "uvicorn==0.54.0" in declared
    assert "pytest==9.2.0" in settings["dependency-groups"]["dev"]
    assert settings["tool"]["uv"]["find-links"] == ["vendor"]
    checked = run(sys.executable, "scripts/check_lock.py", cwd=project)
    assert checked.returncode == 0, tail(checked)


@pytest.mark.parametrize("logger", ["wandb", "mlflow"])
def test_logger_bake_passes_its_whole_suite_and_the_kits_logger_tests(
    logger: str, tmp_path: Path
) -> None:
    project = bake(tmp_path, logger=logger)
    result = python_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")  # all of it
    assert result.returncode == 0, tail(result)
    assert " passed" in result.stdout, tail(result)
    kit = run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
        "platekit/tests/training/test_logger.py", "platekit/tests/training/test_logger_runs.py", "-k", logger,
        cwd=TEMPLATE, timeout=1200, PLATEKIT_TEST_PROJECT=str(project), OMP_NUM_THREADS="1",
    )  # fmt: skip
    assert kit.returncode == 0, tail(kit)
    assert " passed" in kit.stdout and " skipped" not in kit.stdout, tail(kit)


def test_serve_and_docker_bake_passes_its_whole_suite(tmp_path: Path) -> None:
    """An optional part must pass the bake's whole suite, not only its own tests."""
    project = bake(tmp_path, serve="yes", docker="yes")
    result = python_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, tail(result)
    assert " passed" in result.stdout, tail(result)
