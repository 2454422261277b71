"""platekit's own test suite passes: the machinery's tests, run once here, not in each bake.

platekit/tests runs on its fixture project (tests/project) without cookiecutter; here it runs
once against a real bake (serve=yes, so every command is there), which adds the tests of a
bake's own files: DDP, torchrun, SLURM requeue, signals, sweeps, serve, doctor, bench,
checkpoint safety, faults, schedules and the rest. The fixture is checked to be that bake's.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEMPLATE, bake

_spec = importlib.util.spec_from_file_location(
    "fixture_project", TEMPLATE / "tools" / "fixture_project.py"
)  # the template's tools are not a package
assert _spec is not None and _spec.loader is not None
fixture_project = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture_project)


@pytest.fixture(scope="module")
def served_bake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bake(tmp_path_factory.mktemp("platekit_suite"), **fixture_project.ANSWERS)


def test_platekit_fixture_project_is_the_templates_bake(served_bake: Path) -> None:
    """platekit's tests run on what the template bakes: a template change must reach it."""
    assert fixture_project.differences(served_bake) == []


@pytest.mark.slow
def test_platekit_test_suite_passes(served_bake: Path) -> None:
    env = {**os.environ, "PLATEKIT_TEST_PROJECT": str(served_bake)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "platekit/tests", "-q", "-p", "no:cacheprovider",
         "-m", "slow or not slow", "-n", "2"],
        cwd=TEMPLATE, env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    failures = output.find("= FAILURES =")  # the failures, not the warnings after them
    assert result.returncode == 0, output[failures:][:8000] if failures >= 0 else output[-5000:]
    assert " passed" in result.stdout


def test_platekit_is_lint_clean_and_typed() -> None:
    """platekit's own ruff rules (the bake's) and mypy settings (strict, no module exempt)."""
    kit = TEMPLATE / "platekit"
    for command in (
        ["ruff", "check", "--no-cache", "src", "tests"],
        ["ruff", "format", "--no-cache", "--check", "src", "tests"],
        ["mypy", "--cache-dir", "/dev/null", "src"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", *command], cwd=kit, capture_output=True, text=True,
            timeout=900, check=False,
        )  # fmt: skip
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
