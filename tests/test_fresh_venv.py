"""A baked project installs into a brand-new venv from its own pins alone and passes its
tests there: `make setup` (the lock, then `pip check`), nothing from the template's venv."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import bake, tail


def pins(text: str) -> dict[str, str]:
    """``{name: version}`` with index-normalised names and local labels (``+cpu``) dropped."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s+]+)", text, re.MULTILINE)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


def isolated_env() -> dict[str, str]:
    """This environment without the template's venv: no VIRTUAL_ENV, PYTHONPATH or its bin/."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    ours = Path(sys.executable).parent
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if Path(p) != ours)
    env["OMP_NUM_THREADS"] = "1"
    env["PIP_NO_COMPILE"] = "1"  # skip byte-compiling torch at install; Python does it on import
    return env


def run(*command: str, cwd: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(command), cwd=cwd, env=isolated_env(), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_fresh_venv_from_the_lock_passes_the_baked_tests(tmp_path: Path) -> None:
    started = time.monotonic()
    project = bake(tmp_path)
    base_python = str(Path(sys.base_prefix) / "bin" / "python3")
    setup = run("make", "setup", f"PYTHON={base_python}", cwd=project)
    assert setup.returncode == 0, tail(setup)
    print(f"fresh venv: make setup done after {time.monotonic() - started:.0f} s")
    assert "No broken requirements found." in setup.stdout  # make setup ends with pip check

    venv_python = str(project / ".venv" / "bin" / "python")
    frozen = run(venv_python, "-m", "pip", "freeze", "--all", "--exclude-editable", cwd=project)
    installed = {name: v for name, v in pins(frozen.stdout).items() if name != "pip"}
    lock = pins((project / "requirements.lock").read_text())
    assert installed == lock  # the lock is complete: pip added nothing it does not pin
    version = run(venv_python, "-c", "import torch; print(torch.__version__)", cwd=project)
    assert version.stdout.startswith("2.13.0"), tail(version)

    tests = run(venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert tests.returncode == 0, tail(tests)
    assert " passed" in tests.stdout
    print(f"fresh venv: bake + setup + baked tests in {time.monotonic() - started:.0f} s")
