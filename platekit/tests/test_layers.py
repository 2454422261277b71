"""platekit's layers: the import-linter contract in pyproject.toml holds, breaks on a planted
back-import, leaves no module out; the config layer imports neither torch nor Lightning; no
module reaches a higher layer through a string; the class registry imports nothing to
refuse a name."""

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import platekit
from platekit import Project, UserError, current, use
from platekit._registry import SLOT_BASES, Registry

KIT = Path(platekit.__file__).resolve().parent  # src/platekit
PYPROJECT = KIT.parents[1] / "pyproject.toml"
LINT = Path(sys.executable).with_name("lint-imports")
CONTRACT = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"][0]


def lint(src: Path, config: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the platekit package found under ``src``."""
    return subprocess.run(
        [str(LINT), "--config", str(config), "--no-cache"],
        capture_output=True, text=True, timeout=300, check=False,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, cwd=src,
    )  # fmt: skip


def planted(tmp_path: Path, file: str, line: str) -> Path:
    """A copy of platekit's source with ``line`` added to ``file``."""
    src = tmp_path / "src"
    shutil.copytree(KIT, src / "platekit", ignore=shutil.ignore_patterns("__pycache__"))
    target = src / "platekit" / file
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as out:
        out.write(f"\n{line}\n")
    return src


def layer_of(module: str) -> int:
    """The index of ``module``'s layer in the contract, 0 at the top."""
    name = module.removeprefix("platekit.")
    for index, layer in enumerate(CONTRACT["layers"]):
        for part in layer.split("|"):
            part = part.strip()
            if name == part or name.startswith(part + "."):
                return index
    raise AssertionError(f"{module} is in no layer")


def module_of(path: Path) -> str:
    parts = list(path.relative_to(KIT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_layers_contract_is_kept() -> None:
    assert len(CONTRACT["layers"]) >= 5
    assert CONTRACT["exhaustive"] is True  # every module of platekit sits in a layer
    result = lint(KIT.parent)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("file", "line", "arrow"),
    [
        # a module-level import from the ground up to the commands
        ("_files.py", "from platekit.commands import command",
         "platekit._files -> platekit.commands"),
        # a function-level one, from data up to training
        ("data/_cells.py", "def later():\n    from platekit.training import TrainRun",
         "platekit.data._cells -> platekit.training"),
        # one only for the type checker, from config up to models
        ("config/_nodes.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
         "    from platekit.models import Task", "platekit.config._nodes -> platekit.models"),
    ],
)  # fmt: skip
def test_a_planted_back_import_breaks_the_contract(
    tmp_path: Path, file: str, line: str, arrow: str
) -> None:
    result = lint(planted(tmp_path, file, line))
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Contracts: 0 kept, 1 broken." in result.stdout
    assert arrow in result.stdout, result.stdout[-3000:]


def test_a_module_in_no_layer_breaks_the_contract(tmp_path: Path) -> None:
    result = lint(planted(tmp_path, "extras/__init__.py", '"""A folder no layer names."""'))
    assert result.returncode == 1, result.stdout[-2000:]
    assert "platekit.extras" in result.stdout, result.stdout[-3000:]


def test_the_config_layer_imports_neither_torch_nor_lightning() -> None:
    probe = (
        "import sys, platekit.config, platekit.config._schema, platekit.config._check\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'lightning'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_no_module_is_imported_by_string_from_a_layer_below_it() -> None:
    """Strings handed to an import (``import_module``, ``find_spec``, the registry's slot
    bases) name only modules of the same layer or below, or other packages."""
    found = []
    for path in sorted(KIT.rglob("*.py")):
        here = module_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            called = ast.unparse(node.func)
            if not called.endswith(("import_module", "__import__", "find_spec")):
                continue
            named = node.args[0]
            text = str(named.value) if isinstance(named, ast.Constant) else ""
            if text.startswith("platekit.") and layer_of(text) < layer_of(here):
                found.append(f"{here}: {called}({text!r})")
    for slot, (module, _) in SLOT_BASES.items():
        if module.startswith("platekit"):
            assert layer_of(module) >= layer_of("platekit._registry"), (slot, module)
    assert not found, found


@pytest.fixture
def side_effect_project(tmp_path: Path) -> Path:
    """A project package whose module writes a file when it is imported."""
    package = tmp_path / "sidefx_project"
    package.mkdir()
    (package / "__init__.py").write_text("")
    marker = tmp_path / "imported"
    (package / "boom.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('imported')\n"
        "import os\n\n"
        "def build():\n    return None\n\n"
        "class Plain:\n    pass\n\n"
        "class _Hidden:\n    pass\n"
    )
    before = current()
    sys.path.insert(0, str(tmp_path))
    use(Project("sidefx_project", tmp_path, tmp_path))
    yield marker
    use(before)
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name.startswith("sidefx_project")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    "name",
    [
        "sidefx_project.boom.build",  # a function
        "sidefx_project.boom.Missing",  # no such class
        "sidefx_project.boom.os.system",  # an attribute path
        "sidefx_project.boom._Hidden",  # a private class
        "sidefx_project.boom.Plain",  # a class of no slot's base
        "elsewhere.boom.Plain",  # outside the roots
        "sidefx_project.boom.Plain" + ".x" * 200,  # too long to read
    ],
)
def test_the_registry_imports_no_module_to_refuse_a_name(
    side_effect_project: Path, name: str
) -> None:
    with pytest.raises(UserError, match="refused") as refusal:
        Registry().resolve(name, "net", "model.net")
    assert "\n" not in str(refusal.value)
    assert not side_effect_project.exists(), f"{name} imported its module to refuse it"
    assert "sidefx_project.boom" not in sys.modules
