"""The classes a checkpoint may name, found by exact identity: loading a checkpoint runs no code.

A checkpoint names the classes that rebuild it (its model, net, task, optimizer, schedule and
data module). ``weights_only=True`` stops pickled code, not those names: Hydra resolves
``a.b.c`` by importing ``a.b`` and walking attributes, so anything an allowed module imports
(``<package>.x.subprocess.Popen``) would be reachable. Here a name is resolved without
walking anything:

1. ``<package path>.<Class>`` must lie under an allowed root (this project's package,
   ``torch.nn``, ``torch.optim``), and exactly one module file under that package path must
   define ``class <Class>`` at its top level. That is found by reading the source files
   (no import), so a name that fails imports nothing.
2. Only that one module is imported; the class is read from its own namespace and must be
   the class it defines (``__module__``, ``__qualname__``), of the slot's base class
   (a net is an ``nn.Module``, an optimizer an ``Optimizer``, ...).

Nothing else is accepted: no functions, no attribute paths, no Hydra keys (``_partial_``,
``_args_``, ``_recursive_``, ``_convert_``), and the strings of a checkpoint are never
resolved as interpolations (``build`` takes plain Python values, not OmegaConf nodes).
A class outside the roots (a third-party net) is trusted on purpose by its exact name:
``trusted_classes=[package.module.Class]``.
"""

import ast
import builtins
import importlib
import inspect
import re
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from platekit._errors import UserError, shown
from platekit._project import current

KIT = __name__.split(".")[0]  # this support package
LIBRARIES = (KIT, "torch.nn", "torch.optim")
HYDRA_KEYS = frozenset({"_partial_", "_args_", "_recursive_", "_convert_", "_component_"})
MAX_NAME = 300  # no class path is longer; a longer "name" is refused unread
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")

# The model's hyperparameters that name a class, and the slot each is built in.
MODEL_PARTS = {"net": "net", "task": "task", "optimizer": "optimizer", "scheduler": "scheduler"}

# Names older checkpoints and configs hold for classes that have moved: old -> current.
ALIASES: dict[str, str] = {}

# platekit 0.1 and 0.2 named classes by their modules (``platekit.models.tasks.Cosine``);
# 0.4 made those modules private, their classes named by package (``platekit.models.Cosine``).
# An old module path that no longer exists is read as the package its classes went to.
MOVED_PACKAGES = {
    "models": "models",
    "data": "data",
    "checkpoints": "checkpoints",
    "callbacks": "training",
    "runtime": "training",
    "reporting": "training",
}
# Slots Hydra builds from the config itself: an old name there must be edited, not read.
CONFIG_SLOTS = frozenset({"callback", "logger"})

# What each slot builds: (module, class) of the base its classes must derive from.
SLOT_BASES: dict[str, tuple[str, str]] = {
    "model": ("lightning.pytorch.core.module", "LightningModule"),
    "net": ("torch.nn.modules.module", "Module"),
    "part": ("torch.nn.modules.module", "Module"),  # a class nested in a net's arguments
    "task": (__name__, "NamedTask"),  # platekit.models.Task derives from it
    "optimizer": ("torch.optim.optimizer", "Optimizer"),
    "scheduler": ("torch.optim.lr_scheduler", "LRScheduler"),
    "data": ("lightning.pytorch.core.datamodule", "LightningDataModule"),
    # Built by Hydra, never from a checkpoint; resolved here only to read their settings.
    "callback": ("lightning.pytorch.callbacks.callback", "Callback"),
    "logger": ("lightning.pytorch.loggers.logger", "Logger"),
}


class MovedNameError(UserError):
    """A config names a class by its platekit 0.1/0.2 path: the line names the path of now."""


class NamedTask:
    """The base of every class a model's ``task`` may name: ``platekit.models.Task`` derives
    from it. It stands here, under every layer, so that checking a checkpoint's task imports
    nothing of the layers above."""


@dataclass(frozen=True)
class Registry:
    """Resolves class names for the slots of a checkpoint or a model config.

    Args:
        roots: packages whose classes may be built (found in their source, imported one
            module at a time).
        trusted: exact ``module.Class`` names of classes outside the roots, trusted on
            purpose (``trusted_classes=[...]``).
    """

    trusted: frozenset[str] = field(default_factory=frozenset)

    @property
    def roots(self) -> tuple[str, ...]:
        """The project's package, this support package, ``torch.nn`` and ``torch.optim``."""
        return (current().package, *LIBRARIES)

    def resolve(self, name: Any, slot: str, where: str = "") -> type:
        """The class ``name`` stands for in ``slot``; a UserError, before any import, if none."""
        place = f" at {where}" if where else ""
        if not isinstance(name, str) or len(name) > MAX_NAME or not DOTTED.fullmatch(name):
            raise UserError(
                f"{slot}{place} names {shown(name)}, which is not a class name "
                "(package.Class); refused without importing anything"
            )
        name = moved(ALIASES.get(name, name), self.roots[0])
        renamed = moved_in_platekit(name)
        if renamed != name and slot in CONFIG_SLOTS:
            raise MovedNameError(
                f"{slot}{place} names '{name}', which platekit 0.4 moved: write "
                f"'{renamed}' in the config"
            )
        name = renamed
        if name in self.trusted:
            module, _, qualname = name.rpartition(".")
        else:
            located = locate(name, self.roots)
            if located is None:
                raise UserError(
                    f"{slot}{place} names '{name}', which is not a class defined under "
                    f"{', '.join(self.roots)}; refused without importing it. If you trust "
                    f"that class, name it exactly in trusted_classes=[module.Class]"
                )
            module, qualname = located
            if derives(module, qualname, slot_base(slot)) is False:  # told from source
                raise UserError(
                    f"{slot}{place} names '{name}', which is not a {slot_base(slot).__name__} "
                    f"class (by its source); refused without importing it"
                )
        found = vars(importlib.import_module(module)).get(qualname)
        base = slot_base(slot)
        if not (
            isinstance(found, type)
            and found.__module__ == module
            and found.__qualname__ == qualname
            and issubclass(found, base)
        ):
            raise UserError(
                f"{slot}{place} names '{name}', which is not a {base.__name__} class defined "
                f"in {module}; refused without building it"
            )
        missing = abstract_methods(found)
        if missing:
            raise UserError(
                f"{slot}{place} names '{name}', a base class that leaves {', '.join(missing)} "
                f"to its subclasses; refused without building it: name a class that defines them"
            )
        return found

    def build(self, node: Mapping[str, Any], slot: str, where: str = "", **extra: Any) -> Any:
        """``cls(**arguments)`` for a ``{"_target_": name, **arguments}`` node of plain values.

        A dict with a ``_target_`` among the arguments (at any depth) is built the same way,
        as a ``part`` (an ``nn.Module``); ``extra`` arguments are passed as they are.
        """
        check_plain(node, where or slot)
        cls = self.resolve(node.get("_target_"), slot, where)
        arguments = {
            key: self._build_values(value, f"{where or slot}.{key}")
            for key, value in node.items()
            if key != "_target_"
        }
        return cls(**arguments, **extra)

    def _build_values(self, value: Any, where: str) -> Any:
        if isinstance(value, Mapping):
            if "_target_" in value:
                return self.build(value, "part", where)
            return {key: self._build_values(v, f"{where}.{key}") for key, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._build_values(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def key(self, cls: type) -> str:
        """The name to store for ``cls``: ``<root>.<Class>`` when that is unambiguous.

        Such a name survives the class moving to another module of its package; otherwise
        (two classes of that name under the root) the full ``module.Class``.
        """
        name = f"{cls.__module__}.{cls.__qualname__}"
        for root in self.roots:
            if cls.__module__ == root or cls.__module__.startswith(root + "."):
                short = f"{root}.{cls.__qualname__}"
                if locate(short, self.roots) == (cls.__module__, cls.__qualname__):
                    return short
        return name

    def check_model(self, hyperparameters: Mapping[str, Any], where: str = "model") -> None:
        """Resolve the classes a model's hyperparameters name, each in its own slot."""
        check_plain(hyperparameters, where)
        for key, value in hyperparameters.items():
            self.check(value, MODEL_PARTS.get(key, "part"), f"{where}.{key}")

    def check(self, node: Any, slot: str, where: str = "") -> None:
        """Resolve every ``_target_`` in ``node`` (the top one in ``slot``), building nothing."""
        if isinstance(node, Mapping):
            check_plain(node, where or slot)
            if "_target_" in node:
                self.resolve(node["_target_"], slot, where)
            for key, value in node.items():
                if key != "_target_":
                    self.check(value, "part", f"{where or slot}.{key}")
        elif isinstance(node, list | tuple):
            for i, value in enumerate(node):
                self.check(value, "part", f"{where}[{i}]")


_active = Registry()


def active() -> Registry:
    """The registry of this process (``trust`` sets which extra classes it trusts)."""
    return _active


def trust(names: Iterable[str] | None = ()) -> Registry:
    """Make the process's registry trust the exact class names ``names`` (``trusted_classes``)."""
    global _active
    given = [str(name) for name in names or ()]
    for name in given:
        if not DOTTED.fullmatch(name):
            raise UserError(
                f"trusted_classes holds '{name}', which is not an exact class name; "
                "name each class as package.module.Class"
            )
    _active = Registry(trusted=frozenset(given))
    return _active


def moved(name: str, package: str) -> str:
    """A class the project's package held before it moved here keeps working by its old name.

    ``<package>.models.TaskModule`` (configs and checkpoints written before the split) is
    ``platekit.models.TaskModule`` when the project itself defines no such class.
    """
    prefix = f"{package}."
    if not name.startswith(prefix) or locate(name, (package,)) is not None:
        return name
    candidate = moved_in_platekit(f"{KIT}.{name.removeprefix(prefix)}")
    return candidate if locate(candidate, (KIT,)) is not None else name


# Modules of platekit 0.1/0.2 whose names moved elsewhere than their folder's new package.
MOVED_MODULES = {
    "platekit.cli.errors": "from platekit import UserError",
    "platekit.cli.entry": "from platekit.commands import command",
    "platekit.project": "from platekit import Project, use, current",
    "platekit.recipe": "from platekit.training import TrainRun, EvalRun, build_parts",
}
# Old folders whose names went to a public package of another name.
MOVED_FOLDERS = {
    **MOVED_PACKAGES,
    "cli": "commands",
    "serving": "commands",
    "benchmarks": "commands",
}


def old_import(error: ModuleNotFoundError) -> str | None:
    """One line for a module (e.g. one ejected from platekit 0.2) importing a platekit module
    that 0.4 made private, naming the public import to write; None for any other missing module.
    """
    missing = error.name or ""
    if not missing.startswith(f"{KIT}.") or missing in sys.modules:
        return None
    frames = traceback.extract_tb(error.__traceback__)
    sources = [f for f in frames if not f.filename.startswith("<") and f.line]
    where = f"{sources[-1].filename}:{sources[-1].lineno}" if sources else "a module"
    line = sources[-1].line if sources else ""
    written = re.match(r"\s*from (platekit[\w.]*) import ([\w, ]+)", line or "")
    if written and written.group(1).startswith(missing):
        missing, names = written.group(1), written.group(2).strip()
    else:
        names = "<name>"
    parts = missing.split(".")
    fix = MOVED_MODULES.get(missing)
    if fix is None and len(parts) > 2 and parts[1] in MOVED_FOLDERS:
        fix = f"from platekit.{MOVED_FOLDERS[parts[1]]} import {names}"
    return (
        f"{where} imports {missing}, a module platekit 0.4 made private (or removed); "
        f"import public names instead: {fix or 'see platekit README, Public API'}"
    )


def moved_in_platekit(name: str) -> str:
    """An 0.1/0.2 class path (``platekit.models.schedules.Cosine``) as the package that holds
    its class now (``platekit.models.Cosine``), where the old module is gone; else ``name``."""
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != KIT or parts[1] not in MOVED_PACKAGES:
        return name
    if any(part.startswith("_") for part in parts) or locate(name, (KIT,)) is not None:
        return name
    candidate = f"{KIT}.{MOVED_PACKAGES[parts[1]]}.{parts[-1]}"
    return candidate if locate(candidate, (KIT,)) is not None else name


def abstract_methods(cls: type) -> list[str]:
    """The methods ``cls`` leaves abstract (``@abstractmethod``, with or without ABCMeta)."""
    return sorted(
        name
        for name in dir(cls)
        if getattr(inspect.getattr_static(cls, name, None), "__isabstractmethod__", False)
    )


def check_plain(node: Mapping[str, Any], where: str) -> None:
    """Refuse Hydra's special keys: a checkpoint or model config names classes and values only."""
    special = sorted(HYDRA_KEYS.intersection(map(str, node)))
    if special:
        raise UserError(
            f"{where} holds {special[0]}, which is refused: a model or a checkpoint names a "
            "class and its plain arguments only; remove it"
        )


def slot_base(slot: str) -> type:
    module, name = SLOT_BASES[slot]
    base = vars(importlib.import_module(module))[name]
    assert isinstance(base, type)
    return base


def locate(name: str, roots: Iterable[str]) -> tuple[str, str] | None:
    """``(module, class)`` of the one top-level ``class <Class>`` under ``name``'s package path.

    ``name`` is ``<path>.<Class>``; ``<path>`` is a root, a package or a module under it.
    Source files are read, nothing is imported (but the roots' parents, to find them).
    """
    path, _, cls = name.rpartition(".")
    root = next((r for r in roots if path == r or path.startswith(r + ".")), None)
    if root is None or cls.startswith("_"):
        return None
    folder = root_folder(root)
    if folder is None:
        return None
    parts = path[len(root) :].strip(".").split(".") if path != root else []
    if any(part.startswith("_") and part != "__init__" for part in parts):
        return None  # private modules are not part of what a name can reach
    target = folder.joinpath(*parts)
    if target.with_suffix(".py").is_file() and not target.is_dir():
        files = [target.with_suffix(".py")]
    elif target.is_dir():
        files = [file for file in sorted(target.rglob("*.py")) if public_file(file, target)]
    else:
        return None
    found = {
        (module_name(root, folder, file), cls) for file in files if cls in top_level_classes(file)
    }
    for init in (file for file in files if file.name == "__init__.py"):
        package = module_name(root, folder, init)
        for bound, source in exported(init, package):
            place = definition(source, [0]) if bound == cls else None
            if place is not None and place[1] == cls and place[0].startswith(f"{root}."):
                found.add(place)  # a class of this root its __init__ makes public
    if len(found) != 1:
        return None  # none, or ambiguous: name the module (package.module.Class)
    return found.pop()


def public_file(file: Path, top: Path) -> bool:
    """A source file a name may reach: none of its parts below ``top`` is private (``_x``);
    a class of a private module is reached through the ``__init__`` that exports it."""
    parts = file.relative_to(top).parts
    return "__pycache__" not in parts and not any(
        part.startswith("_") and part != "__init__.py" for part in parts
    )


def module_name(root: str, folder: Path, file: Path) -> str:
    parts = list(file.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root, *parts])


@cache
def root_folder(root: str) -> Path | None:
    """The folder of a root package, found without importing it (its parents may be)."""
    module = sys.modules.get(root)
    origin = getattr(module, "__file__", None) if module else None
    if origin is None:
        spec = find_spec(root)
        origin = spec.origin if spec else None
    if not origin or not origin.endswith("__init__.py"):
        return None
    return Path(origin).parent


MAX_SOURCE = 4 * 1024 * 1024  # bytes of a source file read to find its classes
MAX_HOPS = 40  # imports and bases followed for one name: a cycle or a maze stops here


@cache
def parsed(file: Path) -> ast.Module | None:
    """The syntax tree of a source file, read and parsed, never run; None if unreadable."""
    try:
        if file.stat().st_size > MAX_SOURCE:
            return None
        return ast.parse(file.read_bytes(), filename=str(file))
    except (OSError, SyntaxError, ValueError):
        return None


@cache
def top_level_classes(file: Path) -> frozenset[str]:
    """Names of the classes a source file defines at its top level (by a class statement).

    Read from the parsed source: a ``class X(nn.Module):`` in a docstring or a string is text,
    not a class."""
    tree = parsed(file)
    if tree is None:
        return frozenset()
    return frozenset(node.name for node in tree.body if isinstance(node, ast.ClassDef))


def exported(init: Path, package: str) -> Iterator[tuple[str, str]]:
    """``(bound name, "module.name")`` of each ``from <module> import <name>`` in a package's
    ``__init__`` (also inside its ``if TYPE_CHECKING:`` and ``try:`` blocks): what it makes
    public."""
    tree = parsed(init)
    for node in statements(tree.body if tree else []):
        if isinstance(node, ast.ImportFrom):
            source = absolute(node, package)
            for alias in node.names:
                if alias.name != "*":
                    yield alias.asname or alias.name, f"{source}.{alias.name}"


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements and those of its top-level ``if`` and ``try`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from statements(node.body + node.orelse + node.finalbody)


def absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` reads, relative dots resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def module_file(module: str) -> Path | None:
    """The source file of a module of a package on the path, found without importing it."""
    root, *parts = module.split(".")
    folder = root_folder(root) if DOTTED.fullmatch(f"{module}.x") else None
    if folder is None:
        return None
    path = folder.joinpath(*parts)
    for file in (path / "__init__.py", path.with_suffix(".py")):
        if file.is_file():
            return file
    return None


def definition(name: str, hops: list[int]) -> tuple[str, str] | None:
    """``(module, class)`` where the dotted ``name`` is defined by a class statement, following
    the imports that bind it, in source only; None when that cannot be told without running it."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        file = module_file(module)
        if file is None:
            continue
        if cut != len(parts) - 1 or module_file(name) is not None:
            return None  # an attribute of a class, or a module: not a class statement
        hops[0] += 1
        tree = parsed(file)
        if tree is None or hops[0] > MAX_HOPS:
            return None
        wanted = parts[-1]
        package = module if file.name == "__init__.py" else module.rpartition(".")[0]
        stars = []
        for node in statements(tree.body):
            if isinstance(node, ast.ClassDef) and node.name == wanted:
                return module, wanted
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        stars.append(absolute(node, package))
                    elif (alias.asname or alias.name) == wanted:
                        return definition(f"{absolute(node, package)}.{alias.name}", hops)
        for star in stars:
            found = definition(f"{star}.{wanted}", hops)
            if found is not None:
                return found
        return None
    return None


def derives(module: str, cls: str, base: type, hops: list[int] | None = None) -> bool | None:
    """Whether the class ``cls`` of ``module`` derives from ``base``, told from source and
    from modules already imported; None when only importing ``module`` could tell."""
    hops = hops if hops is not None else [0]
    if (module, cls) == (base.__module__, base.__qualname__):
        return True
    file = module_file(module)
    tree = parsed(file) if file else None
    node = next(
        (n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == cls),
        None,
    )
    if node is None or hops[0] > MAX_HOPS:
        return None
    hops[0] += 1
    package = module if file and file.name == "__init__.py" else module.rpartition(".")[0]
    verdicts = [base_derives(expr, tree, module, package, base, hops) for expr in node.bases]
    if True in verdicts:
        return True
    return None if None in verdicts else False


def base_derives(
    expr: ast.expr, tree: Any, module: str, package: str, base: type, hops: list[int]
) -> bool | None:
    """Whether one base expression of a class statement names a class deriving from ``base``."""
    dotted = dotted_name(expr)
    if dotted is None:
        return None  # a call, a subscript: only running the module tells
    first, _, rest = dotted.partition(".")
    full = None
    for node in statements(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == first:
            full = f"{module}.{first}"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == first:
                    full = f"{absolute(node, package)}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == first:
                    full = alias.name
                elif alias.asname is None and alias.name.split(".")[0] == first:
                    full = first
    if full is None:
        found = vars(builtins).get(first) if not rest else None
        return issubclass(found, base) if isinstance(found, type) else None
    full = f"{full}.{rest}" if rest else full
    found = loaded(full) if full.split(".")[0] not in (KIT, current().package) else None
    if isinstance(found, type):
        return issubclass(found, base)
    place = definition(full, hops)  # read from source: this package's or a library's
    return derives(*place, base, hops) if place else None


def dotted_name(expr: ast.expr) -> str | None:
    """``a.b.C`` for a base written as a name or an attribute chain; None for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = dotted_name(expr.value)
        return f"{head}.{expr.attr}" if head else None
    return None


def loaded(name: str) -> Any:
    """The object ``name`` stands for in a module that is already imported; None otherwise."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = sys.modules.get(".".join(parts[:cut]))
        if found is None:
            continue
        for attribute in parts[cut:]:
            found = inspect.getattr_static(found, attribute, None)
        return found
    return None
