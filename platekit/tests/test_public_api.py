"""The public API is what the ``__init__`` files export, each name in the README's table; the
project (its code and its configs) names nothing else of platekit."""

import ast
import importlib
import re
from pathlib import Path

import pytest
import yaml

from support import CONFIG_DIR, PACKAGE, ROOT

KIT = Path(__file__).resolve().parents[1]
SOURCE = KIT / "src" / "platekit"
PUBLIC_MODULES = ("platekit.settings", "platekit.testing")  # public modules, not packages


def packages() -> list[str]:
    return ["platekit"] + [
        f"platekit.{path.parent.name}"
        for path in sorted(SOURCE.glob("*/__init__.py"))
        if not path.parent.name.startswith("_")
    ]


def exported() -> set[str]:
    """``package.Name`` for every name a public package's ``__all__`` lists."""
    names = set()
    for package in packages():
        module = importlib.import_module(package)
        names |= {
            f"{package}.{name}" for name in getattr(module, "__all__", ()) if name != "__version__"
        }
    return names


def readme_names() -> set[str]:
    """The names the README's API table lists: ``platekit.x.A``, and ``B`` after it in a row."""
    text = (KIT / "README.md").read_text()
    table = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    names = set()
    for row in re.findall(r"^\| (`platekit\.[^|]*)\|", table, re.MULTILINE):
        cells = re.findall(r"`([^`]+)`", row)
        package = cells[0].rsplit(".", 1)[0]
        names |= {cell if cell.startswith("platekit.") else f"{package}.{cell}" for cell in cells}
    return {
        name
        for name in names
        if name not in PUBLIC_MODULES
        and name.rsplit(".", 1)[0] not in PUBLIC_MODULES
        and not name.endswith("__")
    }


def test_every_exported_name_is_in_the_readme_and_no_more() -> None:
    assert exported() == readme_names()


def test_the_public_api_is_about_forty_names() -> None:
    assert len(exported()) <= 42, sorted(exported())


def test_every_exported_name_imports() -> None:
    for name in exported():
        package, attribute = name.rsplit(".", 1)
        assert getattr(importlib.import_module(package), attribute) is not None, name


def test_every_other_module_is_private_by_name() -> None:
    public = {name.removeprefix("platekit.") for name in (*packages(), *PUBLIC_MODULES)}
    for path in SOURCE.rglob("*.py"):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        dotted = ".".join(part for part in parts if part != "__init__")
        if dotted in public or dotted in ("", "__main__"):
            continue
        assert any(part.startswith("_") for part in parts), f"{dotted} is public by name"


def project_names(kind: str) -> set[str]:
    """Every ``platekit...`` name the project's code (or its tests) imports, or its configs name."""
    named = set()
    folder = {"code": ROOT / "src" / PACKAGE, "tests": ROOT / "tests"}.get(kind)
    for path in folder.rglob("*.py") if folder else ():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("platekit"):
                named |= {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Import):
                named |= {a.name for a in node.names if a.name.startswith("platekit")}
    for path in Path(CONFIG_DIR).rglob("*.yaml") if kind == "configs" else ():
        named |= set(re.findall(r"\b(platekit(?:\.\w+)+)", path.read_text()))
    return named


@pytest.mark.parametrize(
    "kind", ["code", "configs", pytest.param("tests", marks=pytest.mark.bake)]
)  # the fixture project holds no tests/: a bake's are checked against the bake
def test_the_project_names_only_public_names(kind: str) -> None:
    named = project_names(kind)
    assert named, f"the project's {kind} name no platekit name: the scan is broken"
    public = exported() | set(packages()) | set(PUBLIC_MODULES)
    public |= {f"{module}.{name}" for module in PUBLIC_MODULES for name in dir_of(module)}
    assert sorted(named - public) == []


def dir_of(module: str) -> list[str]:
    return [name for name in vars(importlib.import_module(module)) if not name.startswith("_")]


def test_the_shipped_configs_target_public_classes() -> None:
    targets = []
    for path in Path(CONFIG_DIR).rglob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            targets += re.findall(r"'_target_': '(platekit[^']+)'", repr(document))
    assert targets, "no shipped config names a platekit class: the scan is broken"
    assert sorted(set(targets) - exported()) == []
