"""A baked project installs into a brand-new venv from its own pins alone and passes its
tests there: `make setup` (the lock, then `pip check`), nothing from the template's venv."""

import hashlib
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
    # a line per step, pip's output in the log (less make's own lines when make test runs
    # this inside another make: "make[1]: Entering directory ...")
    lines = [line for line in setup.stdout.splitlines() if not line.startswith("make[")]
    assert len(lines) <= 10, setup.stdout
    assert lines[1].startswith("setup: torch cpu build (no NVIDIA driver found")  # nvcc is here
    assert lines[1].endswith("the other: make setup TORCH_VARIANT=cu130")
    log = (project / ".venv" / "setup.log").read_text()
    assert "No broken requirements found." in log  # make setup ends with pip check

    venv_python = str(project / ".venv" / "bin" / "python")
    frozen = run(venv_python, "-m", "pip", "freeze", "--all", "--exclude-editable", cwd=project)
    installed = {name: v for name, v in pins(frozen.stdout).items() if name not in ("pip", "uv")}
    lock = pins((project / "requirements.lock").read_text())
    assert installed == lock  # the lock is complete: pip added nothing it does not pin
    probe = "import torch; print(torch.__version__, torch.version.cuda)"
    version = run(venv_python, "-c", probe, cwd=project)
    assert version.stdout.split() == ["2.13.0+cpu", "None"], tail(version)  # the CPU build
    # ... from the file whose sha256 the lock pins (pip names the file it took in its log)
    [taken] = re.findall(r"(/\S*torch-2\.13\.0[^/\s]*\.whl)", log)[:1] or [""]
    if taken.startswith("/"):
        digest = hashlib.sha256(Path(taken).read_bytes()).hexdigest()
        torch_line = next(
            line
            for line in (project / "requirements.lock").read_text().splitlines()
            if line.startswith("torch==")
        )
        assert f"--hash=sha256:{digest}" in torch_line

    tests = run(venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert tests.returncode == 0, tail(tests)
    assert " passed" in tests.stdout
    print(f"fresh venv: bake + setup + baked tests in {time.monotonic() - started:.0f} s")


@pytest.mark.slow
def test_a_replaced_vendor_wheel_is_refused_by_every_install_route(tmp_path: Path) -> None:
    """make setup (the CI workflow's set-up), pip with the lock (as environment.yml runs it),
    uv, and the Dockerfile's install lines (both images) each check the vendor/ wheel
    against the lock's or platekit.txt's sha256."""
    project = bake(tmp_path, docker="yes")
    [wheel] = (project / "vendor").glob("*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # another file under the same name
    base_python = str(Path(sys.base_prefix) / "bin" / "python3")
    setup = run("make", "setup", f"PYTHON={base_python}", cwd=project)
    assert setup.returncode != 0
    assert "setup: failed: " in setup.stderr and "vendor/platekit.txt" in setup.stderr
    assert "DO NOT MATCH THE HASHES" in setup.stderr, tail(setup)
    assert not (project / ".venv" / ".installed").exists()
    python, uv = project / ".venv" / "bin" / "python", project / ".venv" / "bin" / "uv"
    # environment.yml's pip section, as conda runs it (less its --extra-index-url line: that
    # index is unreachable here, and pip would retry it for each package)
    conda_pip = run(
        str(python), "-m", "pip", "install", "--dry-run", "-r", "requirements.lock", cwd=project
    )
    assert conda_pip.returncode != 0
    assert "DO NOT MATCH THE HASHES" in conda_pip.stderr, tail(conda_pip)
    by_uv = run(
        str(uv), "pip", "install", "--python", str(python), "--require-hashes", "--no-deps",
        "-r", "requirements.lock", cwd=project,
    )  # fmt: skip
    assert by_uv.returncode != 0
    assert "platekit" in by_uv.stderr and "hash" in by_uv.stderr.lower(), tail(by_uv)
    # The Dockerfile's install lines, as the image build's shell runs them (python: the
    # venv's), for the CPU image and the CUDA one: each stops at the replaced wheel.
    dockerfile = (project / "Dockerfile").read_text()
    pattern = r"^RUN (python -m pip install .*?)(?<!\\)\n"  # to a line not ending in a backslash
    runs = re.findall(pattern, dockerfile, re.MULTILINE | re.DOTALL)
    [install] = [command for command in runs if "vendor/platekit.txt" in command]
    assert "-r requirements-cu130.lock" in install and "-r vendor/platekit.txt" in install
    env = {**os.environ, "PATH": f"{python.parent}:{os.environ['PATH']}"}
    for variant in ("cpu", "cu130"):
        image = subprocess.run(
            ["sh", "-c", install], cwd=project, env={**env, "TORCH_VARIANT": variant},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert image.returncode != 0, variant
        assert "DO NOT MATCH THE HASHES" in image.stderr, (variant, tail(image))
        assert "platekit" in image.stderr, (variant, tail(image))
