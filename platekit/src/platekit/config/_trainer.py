"""``lightning.Trainer``'s arguments and their rules, read from the installed Lightning's source.

Importing Lightning to ask its signature would cost every command seconds before its config is
checked; parsing ``trainer.py`` costs ~35 ms, once. The annotations are read as syntax, never
evaluated: a name this module does not know (``Accelerator``, ``_PRECISION_INPUT``) stands for a
class a config cannot hold, so a union keeps only what a config can write (``Union[str,
Accelerator]`` takes a string). Bounds the annotations cannot say are ``TRAINER_RANGES``; values a
type cannot describe (``precision``'s names) keep a written rule in ``config/_schema.py``.
"""

import ast
import difflib
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, Optional, Union

from platekit.config._rules import Rule, passed, typed
from platekit.settings import EMPTY, Range, annotated


class Opaque:
    """A class Lightning's annotation names that a config cannot hold (a ``Strategy``)."""


NAMES: Mapping[str, Any] = {
    **{kind.__name__: kind for kind in (int, float, str, bool, list, dict, tuple)},
    "Optional": Optional,
    "Union": Union,
    "Literal": Literal,
    "Iterable": Iterable,
    "Sequence": Sequence,
}

TRAINER_RANGES: Mapping[str, Range] = {
    "num_nodes": Range(low=1),
    "max_epochs": Range(low=-1, example=15),
    "min_epochs": Range(low=0, example=1),
    "max_steps": Range(low=-1, example=1000),
    "min_steps": Range(low=0, example=100),
    "accumulate_grad_batches": Range(low=1),
    "gradient_clip_val": Range(above=0.0, example=1.0),
    "check_val_every_n_epoch": Range(low=1),
    "num_sanity_val_steps": Range(low=-1, example=2),
    "log_every_n_steps": Range(low=1, example=10),
    "reload_dataloaders_every_n_epochs": Range(low=0),
    "fast_dev_run": Range(low=0, example=1),
    "val_check_interval": Range(above=0.0, example=0.5),  # 0 divides by zero in Lightning
}


@cache
def trainer_parameters() -> Mapping[str, tuple[Any, Any]] | None:
    """``name -> (annotation, default)`` of ``Trainer.__init__``; ``None`` where the source is
    not found (Trainer then names a wrong key itself)."""
    spec = find_spec("lightning")  # a top-level name: found, not imported
    if spec is None or spec.origin is None:
        return None
    source = Path(spec.origin).parent / "pytorch" / "trainer" / "trainer.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    init = next(
        (
            method
            for node in tree.body
            if isinstance(node, ast.ClassDef) and node.name == "Trainer"
            for method in node.body
            if isinstance(method, ast.FunctionDef) and method.name == "__init__"
        ),
        None,
    )
    if init is None:
        return None
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[Any] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [
        *zip(positional, defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    return {
        arg.arg: (_annotation(arg.annotation), _literal(default))
        for arg, default in pairs
        if arg.arg != "self"
    }


def trainer_rule(path: str) -> Rule | None:
    """The rule of ``trainer.<key>`` read off Trainer's annotation; ``None`` for another path."""
    head, _, key = path.partition(".")
    parameters = trainer_parameters()
    if head != "trainer" or parameters is None or key not in parameters:
        return None
    annotation, default = parameters[key]
    bounds = TRAINER_RANGES.get(key)
    rule = typed(annotation if bounds is None else annotated(annotation, bounds), default)
    return rule or passed(f"lightning.Trainer (its {key} argument)")


def trainer_argument(path: str) -> bool:
    """Whether ``path`` is ``trainer.<an argument of Trainer.__init__>``."""
    head, _, key = path.partition(".")
    parameters = trainer_parameters()
    return head == "trainer" and parameters is not None and key in parameters


def unknown_trainer_key(path: str) -> str | None:
    """The line for ``trainer.<key>`` naming no Trainer argument (``++trainer.max_epoch``)."""
    head, _, rest = path.partition(".")
    key = rest.partition(".")[0]
    parameters = trainer_parameters()
    if head != "trainer" or not key or parameters is None or key in {"_target_", *parameters}:
        return None
    close = difflib.get_close_matches(key, sorted(parameters), n=3, cutoff=0.5)
    near = f" (nearest: {', '.join(close)})" if close else ""
    return f"trainer.{key} is not a setting of lightning.Trainer{near}; fix the key"


def _annotation(node: ast.expr | None) -> Any:
    """The typing object an annotation's syntax spells; :class:`Opaque` for what it cannot."""
    if node is None:
        return EMPTY
    if isinstance(node, ast.Constant):
        return node.value  # None, or a Literal's member
    if isinstance(node, ast.Name):
        return NAMES.get(node.id, Opaque)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _subscript(Union, (_annotation(node.left), _annotation(node.right)))
    if isinstance(node, ast.Subscript):
        origin = _annotation(node.value)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        args = tuple(_annotation(item) for item in items)
        return Opaque if origin is Opaque else _subscript(origin, args)
    return Opaque  # an attribute (typing.Any), a string, a call


def _subscript(origin: Any, args: tuple[Any, ...]) -> Any:
    try:
        return origin[args if len(args) > 1 else args[0]]
    except TypeError:  # a form typing refuses: nothing checkable
        return Opaque


def _literal(node: ast.expr | None) -> Any:
    try:
        return EMPTY if node is None else ast.literal_eval(node)
    except ValueError:  # a name or call: no example from it
        return EMPTY
