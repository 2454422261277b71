"""``platekit eject``: a team copies a module of platekit into its project and the project
then uses the copy: its configs, its commands, its checkpoints. Real bakes, real runs."""

import ast
import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from support import copy_project, run_python

PACKAGE = "eject_probe"  # a name no other test's bake uses


@pytest.fixture(scope="session")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite's project under its own package name, never changed (each test ejects into a
    copy of it)."""
    return copy_project(tmp_path_factory.mktemp("eject_bake"), PACKAGE)


@pytest.fixture
def project(baked: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(baked, tmp_path / baked.name, symlinks=True))


def run(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python args...`` in ``cwd`` with the project's ``src`` importable, one thread."""
    root = next((p for p in (cwd, *cwd.parents) if (p / "src" / PACKAGE).is_dir()), cwd)
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    env.pop("CONFIG_DIR", None)
    return run_python(list(args), cwd, env, timeout)


PUBLIC = {
    name
    for package in ("platekit", "platekit.data", "platekit.models", "platekit.checkpoints",
                    "platekit.training", "platekit.commands", "platekit.config")
    for name in importlib.import_module(package).__all__
}  # fmt: skip


def eject(cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    return run(cwd, "-m", "platekit", "eject", name)


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.parts and "__pycache__" not in path.parts
    }


def test_refusals_are_one_line_and_write_nothing(project: Path, tmp_path: Path) -> None:
    before = snapshot(project)
    cases = [
        (tmp_path, "models.schedules", "is not inside a project"),
        (project, "models.nothing", "platekit has no module or class 'models.nothing'"),
        (project, "NoSuchClass", "platekit has no module or class 'NoSuchClass'"),
        (project, "data", "platekit.data is a package; eject one of its modules: data.adapters,"),
        (project, "data.__init__", "'data.__init__' is not a module or class name"),
    ]
    for cwd, name, says in cases:
        result = eject(cwd, name)
        assert result.returncode == 1, name
        assert result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: ")
        assert says in line
    assert snapshot(project) == before

    assert eject(project, "models.schedules").returncode == 0
    after = snapshot(project)
    result = eject(project / "configs", "platekit.models.Cosine")  # from a subfolder
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"error: src/{PACKAGE}/models/schedules.py exists already (platekit.models._schedules "
        "was ejected before"
    )
    assert snapshot(project) == after


def test_eject_copies_the_module_and_points_configs_and_commands_at_it(project: Path) -> None:
    result = eject(project, "models.schedules")
    assert result.returncode == 0, result.stderr
    copy = project / "src" / PACKAGE / "models" / "schedules.py"
    assert f"platekit.models._schedules -> src/{PACKAGE}/models/schedules.py" in result.stdout
    text = copy.read_text()
    assert text.startswith("# Ejected from platekit.models._schedules (platekit ")
    imports = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)]
    assert all(node.level == 0 for node in imports)  # still uses the rest of platekit
    kit = [node.module for node in imports if (node.module or "").startswith("platekit")]
    assert kit == ["platekit"], kit  # by public names only: ``from platekit import UserError``
    assert "from platekit import UserError" in text
    for path in (project / "configs" / "scheduler").glob("*.yaml"):
        target = yaml.safe_load(path.read_text())["_target_"]
        assert target.startswith(f"{PACKAGE}.models.schedules."), path.name
        assert f"configs/scheduler/{path.name}: _target_ now names" in result.stdout

    result = eject(project / "src", "commands.export")  # a command's body
    assert result.returncode == 0, result.stderr
    assert (project / "src" / PACKAGE / "commands" / "export.py").is_file()
    assert (project / "src" / PACKAGE / "commands" / "__init__.py").is_file()
    command = (project / "src" / PACKAGE / "export.py").read_text()
    assert "from .commands.export import export" in command
    assert "from platekit.commands import command\n" in command  # the entry point stays
    assert "export" not in command.split("from platekit.commands import command")[1].split("\n")[0]
    body = (project / "src" / PACKAGE / "commands" / "export.py").read_text()
    private = [line for line in body.splitlines() if re.match(r"from platekit\S*\._", line)]
    public = [line for line in body.splitlines() if re.match(r"from platekit(\.[a-z]+)* ", line)]
    assert public, body[:2000]  # what platekit exports is imported by its public name
    for line in private:  # the rest names what no public package exports
        names = line.split(" import ")[1].split(", ")
        assert all(name.split(" as ")[0] not in PUBLIC for name in names), line

    result = eject(project, "CsvDataModule")  # a class: the module that defines it
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((project / "configs" / "data" / "csv.yaml").read_text())["_target_"] == (
        f"{PACKAGE}.data.csv.CsvDataModule"
    )

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is not None:  # the copies and rewritten files lint as the project's own code
        lint = subprocess.run(
            [ruff, "check", "src"], cwd=project, capture_output=True, text=True, check=False
        )
        assert lint.returncode == 0, lint.stdout


@pytest.mark.slow
def test_the_project_trains_and_exports_with_its_copies(project: Path) -> None:
    assert eject(project, "models.schedules").returncode == 0
    assert eject(project, "commands.export").returncode == 0
    train = run(
        project,
        "-m",
        f"{PACKAGE}.train",
        "trainer.max_epochs=1",
        "scheduler=cosine",
        "callbacks.progress_bar=null",
    )
    assert train.returncode == 0, train.stdout + train.stderr
    (run_dir,) = (project / "outputs" / "train" / "runs").iterdir()
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    ours = f"{PACKAGE}.models.schedules.Cosine"
    assert config["scheduler"]["_target_"] == ours
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    stored = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["scheduler"]
    assert stored["_target_"] == ours
    # The class the checkpoint names is the copy's, found by the registry.
    probe = (
        f"import {PACKAGE}; from platekit._registry import active; "
        f"cls = active().resolve('{ours}', 'scheduler'); print(cls.__module__); "
        f"import {PACKAGE}.export as command; print(command.export.__module__)"
    )
    found = run(project, "-c", probe)
    assert found.stdout.split() == [f"{PACKAGE}.models.schedules", f"{PACKAGE}.commands.export"]

    export = run(
        project,
        "-m",
        f"{PACKAGE}.export",
        f"ckpt_path={checkpoint}",
        "batch_sizes=[1,7]",
        "repeats=2",
    )
    assert export.returncode == 0, export.stdout + export.stderr
    assert list((project / "outputs" / "export" / "runs").glob("*/model.onnx"))
