"""Eject: copy one module of platekit into the project, which then uses its copy.

``platekit eject <name>``, run anywhere inside a baked project, for when a team must change
a command's body or a component its configs name (a schedule, a data module, a callback)::

    platekit eject commands.export          # a module of platekit (its private _export.py)
    platekit eject models.schedules
    platekit eject CsvDataModule            # or a class: the module defining it
    platekit eject platekit.models.Cosine

It writes:

- ``src/<package>/<same path, no underscores>.py`` (``models/schedules.py``): the module, its
  imports of platekit by public name where platekit exports that name
  (``from platekit._errors import UserError`` -> ``from platekit import UserError``), so the
  copy still uses the rest of platekit; ``__init__.py`` files where folders are new;
- every ``_target_`` in ``configs/**/*.yaml`` that names a class of that module
  (``platekit.models.Cosine``) now names the copy's class (``<package>.models.schedules.Cosine``);
- every import of a name of that module in ``src/<package>/`` (a command's file,
  ``export.py``: ``from platekit.commands import command, export``) now imports the copy's,
  relatively (``from .commands.export import export``).

The registry takes classes of the project's package as it takes platekit's, so checkpoints
written with the copy load with it. The rest of platekit keeps using its own module (eject
what configs or commands reach, not what platekit imports itself), and a platekit upgrade
no longer changes the copy: the first line of the copy names the version it came from.

Nothing is written if the copy's file exists already, the name is not a module or class of
platekit, or no project is found: one line says why, and the exit status is 1.
"""

import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from platekit._errors import UserError
from platekit._registry import KIT, locate, root_folder, top_level_classes

TARGET = re.compile(r"""(_target_:\s*["']?)([A-Za-z_][\w.]*)""")
EXAMPLES = "commands.export, models.schedules, data.csv or a class such as CsvDataModule"


@dataclass(frozen=True)
class Project:
    """A baked project's folder and its package name (``src/<package>/__init__.py``)."""

    root: Path
    package: str

    @property
    def source(self) -> Path:
        return self.root / "src" / self.package


@dataclass(frozen=True)
class Change:
    """One file eject writes: its path, its new text and what it says about it."""

    path: Path
    text: str
    note: str


def find_project(start: Path) -> Project:
    """The project ``start`` lies in: ``pyproject.toml``, ``configs/`` and one package."""
    for folder in (start, *start.parents):
        if not ((folder / "pyproject.toml").is_file() and (folder / "configs").is_dir()):
            continue
        packages = sorted(init.parent.name for init in folder.glob("src/*/__init__.py"))
        if len(packages) > 1:  # the one saying it is a project
            packages = [
                name
                for name in packages
                if "Project.at" in (folder / "src" / name / "__init__.py").read_text()
            ]
        if len(packages) == 1:
            return Project(folder, packages[0])
    raise UserError(
        f"{start} is not inside a project: run platekit eject in a baked project's folder "
        "(pyproject.toml, configs/ and src/<package>/__init__.py)"
    )


def kit_folder() -> Path:
    folder = root_folder(KIT)
    assert folder is not None, "platekit is imported, so it is found"
    return folder


def find_module(name: str) -> str:
    """The module of platekit (``models._schedules``) ``name`` (``models.schedules``, a class)
    is or defines a class of."""
    dotted = name.removeprefix(f"{KIT}.")
    if not re.fullmatch(r"[A-Za-z]\w*(\.[A-Za-z]\w*)*", dotted):
        raise UserError(f"'{name}' is not a module or class name; eject e.g. {EXAMPLES}")
    folder = kit_folder()
    package, _, last = dotted.rpartition(".")
    for candidate in (dotted, f"{package}._{last}" if package else f"_{last}"):
        if folder.joinpath(*candidate.split(".")).with_suffix(".py").is_file():
            return candidate
    path = folder.joinpath(*dotted.split("."))
    if path.is_dir():
        inside = sorted(public(f"{dotted}.{file.stem}") for file in path.glob("*.py"))
        inside = [module for module in inside if not module.endswith("__init__")]
        raise UserError(
            f"{KIT}.{dotted} is a package; eject one of its modules: {', '.join(inside)}"
        )
    if "." in dotted:
        located = locate(f"{KIT}.{dotted}", (KIT,))
        if located is not None:
            return located[0].removeprefix(f"{KIT}.")
    else:
        defining = [module for module in modules(folder) if dotted in classes(folder, module)]
        if len(defining) == 1:
            return defining[0]
        if defining:
            raise UserError(
                f"{dotted} is a class of several modules of {KIT} ({', '.join(defining)}); "
                f"name it with its module, e.g. {KIT}.{defining[0]}.{dotted}"
            )
    raise UserError(f"{KIT} has no module or class '{name}'; eject e.g. {EXAMPLES}")


def modules(folder: Path) -> list[str]:
    """The modules of platekit, dotted (``models._schedules``), sorted."""
    found = []
    for file in sorted(folder.rglob("*.py")):
        parts = file.relative_to(folder).with_suffix("").parts
        if "__pycache__" not in parts and parts[-1] not in ("__init__", "__main__"):
            found.append(".".join(parts))
    return found


def public(module: str) -> str:
    """``models._schedules`` as the project's copy names it: ``models.schedules``."""
    return ".".join(part.lstrip("_") for part in module.split("."))


# platekit's public packages: what their __init__ files export is its public API.
PUBLIC_PACKAGES = (
    KIT, f"{KIT}.config", f"{KIT}.data", f"{KIT}.checkpoints", f"{KIT}.models",
    f"{KIT}.training", f"{KIT}.commands", f"{KIT}.settings",
)  # fmt: skip


def public_names() -> dict[tuple[str, str], str]:
    """``{(defining module, name): public package}`` of every name platekit exports."""
    import importlib

    found: dict[tuple[str, str], str] = {}
    for package in reversed(PUBLIC_PACKAGES):  # the shortest path wins: platekit.UserError
        loaded = importlib.import_module(package)
        for name in getattr(loaded, "__all__", ()):
            defining = getattr(getattr(loaded, name), "__module__", None)
            if defining is not None:
                found[(defining, name)] = package
    return found


def classes(folder: Path, module: str) -> frozenset[str]:
    return top_level_classes(folder.joinpath(*module.split(".")).with_suffix(".py"))


def plan(name: str, start: Path) -> list[Change]:
    """The files ejecting ``name`` writes, from the project around ``start``; nothing written."""
    project = find_project(start.resolve())
    module = find_module(name)
    copy = project.source.joinpath(*public(module).split(".")).with_suffix(".py")
    shown = copy.relative_to(project.root)
    if copy.exists():
        raise UserError(
            f"{shown} exists already ({KIT}.{module} was ejected before, or the project has "
            "its own); remove or rename it to eject again"
        )
    source = kit_folder().joinpath(*module.split(".")).with_suffix(".py").read_text()
    ours = f"{project.package}.{public(module)}"
    exported = public_names()
    changes = [
        Change(copy, copied(source, f"{KIT}.{module}", exported), f"{KIT}.{module} -> {shown}")
    ]
    changes += [
        Change(init, f'"""{package_doc(init, project)}"""\n', f"new package {folder_name}")
        for init, folder_name in new_packages(copy, project)
    ]
    for path in sorted(project.root.joinpath("configs").rglob("*.yaml")):
        text = path.read_text()
        renamed = retargeted(text, f"{KIT}.{module}", ours)
        if renamed != text:
            note = f"{path.relative_to(project.root)}: _target_ now names {ours}"
            changes.append(Change(path, renamed, note))
    for path in sorted(project.source.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        text = path.read_text()
        importer = ".".join(path.relative_to(project.root / "src").with_suffix("").parts)
        rewritten = reimported(text, f"{KIT}.{module}", ours, importer, exported)
        if rewritten != text:
            note = f"{path.relative_to(project.root)}: imports {ours} now"
            changes.append(Change(path, rewritten, note))
    return changes


def write(changes: list[Change]) -> None:
    for change in changes:
        change.path.parent.mkdir(parents=True, exist_ok=True)
        change.path.write_text(change.text)


def eject(name: str, start: Path) -> list[str]:
    """Eject ``name`` into the project around ``start``; one line per file written."""
    changes = plan(name, start)
    write(changes)
    code = [change.path for change in changes if change.path.suffix == ".py"]
    return [change.note for change in changes] + [tidy(code, changes[0].path)]


def tidy(files: list[Path], copy: Path) -> str:
    """Sort the rewritten files' imports (and format the copy) with the project's ruff.

    An import made absolute (``platekit._errors``) or made relative (a command's file)
    belongs in another block of the file's imports; the project's ruff settings decide.
    """
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        return "ruff not found: run `make format` to sort the rewritten imports"
    folder = copy.parent
    runs = [["check", "--select", "I", "--fix", *map(str, files)], ["format", str(copy)]]
    for arguments in runs:
        subprocess.run([ruff, *arguments, "--quiet"], cwd=folder, check=False, capture_output=True)
    return f"imports sorted and {copy.name} formatted with {Path(ruff).name}"


def copied(source: str, module: str, exported: dict[tuple[str, str], str]) -> str:
    """``source`` of ``module``, its imports of platekit by public name where it has one, and
    where it came from."""
    from platekit import __version__

    package = module.rpartition(".")[0]
    header = f"# Ejected from {module} ({KIT} {__version__}): this copy is the project's own.\n"
    return header + rewrite_imports(source, package, lambda _, name: None, exported)


ImportTarget = Callable[[str, str], str | None]


def rewrite_imports(
    source: str, package: str, redirect: ImportTarget, exported: dict[tuple[str, str], str]
) -> str:
    """``source`` with each ``from platekit... import`` (relative ones made absolute) split by
    name: to ``redirect(module, name)`` where it gives a module, else to the public package
    that exports the name, else kept. Statements importing nothing of platekit stay as they
    are, comments and all."""
    lines = source.splitlines(keepends=True)
    statements = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and (node.level > 0 or (node.module or "").split(".")[0] == KIT)
    ]
    for node in sorted(statements, key=lambda node: -node.lineno):
        base = absolute(package, "." * node.level, node.module or "") if node.level else node.module
        assert base is not None
        grouped: dict[str, list[str]] = {}
        for alias in node.names:
            source_module = f"{base}.{alias.name}" if base in PUBLIC_PACKAGES else base
            defining = getattr_module(base, alias.name) or source_module
            target = redirect(defining, alias.name) or exported.get((defining, alias.name), base)
            grouped.setdefault(target, []).append(
                alias.name + (f" as {alias.asname}" if alias.asname else "")
            )
        start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[start][: node.col_offset]
        tail = lines[end][node.end_col_offset :]
        text = [
            f"{indent}from {target} import {', '.join(names)}" for target, names in grouped.items()
        ]
        lines[start : end + 1] = ["\n".join(text) + (tail if tail.strip() else "\n")]
    return "".join(lines)


def getattr_module(base: str, name: str) -> str | None:
    """The module defining ``name`` as ``base`` (a public package) hands it on, if it does."""
    if base not in PUBLIC_PACKAGES:
        return None
    import importlib

    value = getattr(importlib.import_module(base), name, None)
    return getattr(value, "__module__", None)


def absolute(package: str, dots: str, name: str) -> str:
    """``from <dots><name>`` written in ``package``, as an absolute module name."""
    parts = package.split(".")
    base = parts[: len(parts) - (len(dots) - 1)]
    return ".".join([*base, name] if name else base)


def retargeted(text: str, module: str, ours: str) -> str:
    """``text`` (a YAML file) with each ``_target_`` naming a class of ``module`` renamed."""

    def rename(match: re.Match[str]) -> str:
        name = match.group(2)
        located = locate(name, (KIT,)) if name.startswith(f"{KIT}.") else None
        if located is None or located[0] != module:
            return match.group(0)
        return f"{match.group(1)}{ours}.{located[1]}"

    return TARGET.sub(rename, text)


def reimported(
    text: str, module: str, ours: str, importer: str, exported: dict[tuple[str, str], str]
) -> str:
    """``text`` (a module named ``importer``) importing from ``ours`` each name it imported
    from ``module``, directly or through a public package (``platekit.commands.export``)."""
    if module not in text and not any(
        defining == module and package in text for (defining, _), package in exported.items()
    ):
        return text
    here = relative(importer, ours)
    package = importer.rpartition(".")[0]
    return rewrite_imports(
        text, package, lambda defining, _: here if defining == module else None, exported
    )


def relative(importer: str, target: str) -> str:
    """``target`` as a relative import written in module ``importer`` (same top package)."""
    package = importer.split(".")[:-1]
    parts = target.split(".")
    common = 0
    while common < min(len(package), len(parts) - 1) and package[common] == parts[common]:
        common += 1
    return "." * (len(package) - common + 1) + ".".join(parts[common:])


def new_packages(copy: Path, project: Project) -> Iterator[tuple[Path, str]]:
    """``(__init__.py, folder)`` for each folder between the package and the copy without one."""
    folder = copy.parent
    while folder != project.source:
        init = folder / "__init__.py"
        if not init.exists():
            yield init, str(folder.relative_to(project.root))
        folder = folder.parent


def package_doc(init: Path, project: Project) -> str:
    dotted = ".".join(init.parent.relative_to(project.root / "src").parts)
    return f"Modules ejected from {KIT} into {dotted}: the project's own copies."
