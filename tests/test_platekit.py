"""platekit's own test suite passes: the machinery's tests, run once here, not in each bake.

platekit/tests bakes the template once (serve=yes, so every command is there) and runs the
kit's tests against that project: DDP, torchrun, SLURM requeue, signals, sweeps, serve,
doctor, bench, checkpoint safety, faults, schedules and the rest.
"""

import os
import subprocess
import sys

import pytest

from conftest import TEMPLATE


@pytest.mark.slow
def test_platekit_test_suite_passes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PLATEKIT_TEST_PROJECT"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "platekit/tests", "-q", "-p", "no:cacheprovider",
         "-m", "slow or not slow", "-n", "2"],
        cwd=TEMPLATE, env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
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
