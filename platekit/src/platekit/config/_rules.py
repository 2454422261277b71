"""What a config value must be: a :class:`Rule`, written out or read off a type annotation.

``config/_schema.py`` writes rules out for the run's own keys (``seed``, ``trainer.*``,
``paths.*``); a component's settings get theirs from its ``__init__`` annotations here
(:func:`typed`, see ``platekit/settings.py`` for what a component declares).
"""

import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from platekit.settings import EMPTY, Range, ranges_in


@dataclass(frozen=True)
class Rule:
    """``need``: what a value must be, as the message says it; ``example``: a good value."""

    need: str
    example: str = ""
    ok: Callable[[Any], bool] = lambda value: True
    checked_elsewhere: bool = False  # passed on unchecked; ``need`` names who checks it


def integer(low: int | None = None, high: int | None = None, *, example: int) -> Rule:
    if low is not None and high is not None:
        bounds = f" from {low} to {high}"
    elif low is not None:
        bounds = f" >= {low}"
    else:
        bounds = f" <= {high}" if high is not None else ""

    def ok(value: Any) -> bool:
        return is_int(value) and (low is None or value >= low) and (high is None or value <= high)

    return Rule(f"an integer{bounds}", str(example), ok)


def number(
    *,
    above: float | None = None,
    low: float | None = None,
    below: float | None = None,
    high: float | None = None,
    example: float,
) -> Rule:
    """A finite number: ``> above``, ``>= low``, ``< below``, ``<= high`` (each optional)."""
    limits = ((">", above), (">=", low), ("<", below), ("<=", high))
    bounds = " and ".join(f"{sign} {limit:g}" for sign, limit in limits if limit is not None)
    within = Range(low=low, high=high, above=above, below=below)

    def ok(value: Any) -> bool:
        return is_number(value) and math.isfinite(value) and within.contains(value)

    return Rule(f"a finite number {bounds}".rstrip(), f"{example:g}", ok)


def choice(*options: Any, example: Any = None) -> Rule:
    shown = ", ".join(show(option) for option in options)
    typed_options = {(show(option), type(option)) for option in options}  # 1 is not "1"
    first = options[0] if example is None else example
    return Rule(f"one of {shown}", show(first), lambda v: (show(v), type(v)) in typed_options)


def flag() -> Rule:
    return Rule("true or false", "true", lambda value: isinstance(value, bool))


def text(example: str) -> Rule:
    return Rule("a non-empty string", example, lambda value: isinstance(value, str) and bool(value))


def matching(need: str, pattern: str, *, example: str) -> Rule:
    """A string matching the regular expression ``pattern`` as a whole."""
    return Rule(need, example, lambda v: isinstance(v, str) and bool(re.fullmatch(pattern, v)))


def target() -> Rule:
    """A ``_target_``: the dotted name of what is built (resolved when it is built)."""
    return matching("a dotted class name", r"[\w.]+", example="torch.optim.AdamW")


def directory(example: str) -> Rule:
    """A directory to write into: not an existing file, and not below one."""
    return Rule("a directory path, not an existing file or below one", example, can_be_dir)


def list_of(item: Rule, *, example: str, empty: bool = False) -> Rule:
    def ok(value: Any) -> bool:
        return isinstance(value, list) and (empty or bool(value)) and all(map(item.ok, value))

    return Rule(f"a {'' if empty else 'non-empty '}list, each {item.need}", example, ok)


def either(*rules: Rule) -> Rule:
    return Rule(
        " or ".join(rule.need for rule in rules),
        rules[0].example,
        lambda value: any(rule.ok(value) for rule in rules),
    )


def null_or(rule: Rule) -> Rule:
    return Rule(f"null or {rule.need}", rule.example, lambda value: value is None or rule.ok(value))


def passed(to: str) -> Rule:
    """A value handed to ``to`` as it is; ``to`` checks it when it is built or run."""
    return Rule(f"passed to {to}, which checks it", checked_elsewhere=True)


# Opened and verified by the checkpoint loader (train's ckpt_path also takes `last`).
CHECKPOINT = Rule(
    "a checkpoint path",
    "outputs/train/runs/<time>/checkpoints/last.ckpt",
    lambda value: value is None or (isinstance(value, str) and bool(value)),
)
MAPPING = Rule("a mapping", "{}", lambda value: isinstance(value, dict))
NULL = Rule("null", "null", lambda value: value is None)


# ---- rules read off annotations ----------------------------------------------------------


def typed(annotation: Any, default: Any = EMPTY, bounds: Range | None = None) -> Rule | None:
    """The rule of a parameter annotated ``annotation``; ``None`` where it says nothing checkable.

    The example is ``bounds.example``, else ``default`` where it meets the rule, else one of
    the type's own.
    """
    rule = _typed(annotation, bounds)
    if rule is None:
        return None
    ranges = ranges_in(annotation)
    declared = bounds or (ranges[-1] if ranges else None)
    example = declared.example if declared is not None else None
    if example is None and default not in (EMPTY, None, ""):
        plain = list(default) if isinstance(default, tuple) else default
        example = plain if rule.ok(plain) else None
    return rule if example is None else replace(rule, example=show(example))


def _typed(annotation: Any, bounds: Range | None) -> Rule | None:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        declared = [meta for meta in annotation.__metadata__ if isinstance(meta, Range)]
        return _typed(args[0], declared[-1] if declared else bounds)
    if annotation is None or annotation is type(None):
        return NULL
    if origin in (Union, types.UnionType):
        return _union(args, bounds)
    if origin is Literal:
        return choice(*args)
    if annotation is bool:
        return flag()
    if annotation is int:
        return _bounded(True, bounds)
    if annotation is float:
        return _bounded(False, bounds)
    if annotation is str:
        return Rule("a string", "text", lambda value: isinstance(value, str))
    if isinstance(annotation, type) and issubclass(annotation, os.PathLike | Path):
        return text("path/to/it")
    if annotation in (dict, Mapping, MutableMapping) or origin in (dict, Mapping, MutableMapping):
        return MAPPING
    if annotation in (list, tuple, Sequence, MutableSequence):
        return list_of(Rule("anything"), example="[]", empty=True)
    if origin in (list, tuple, Sequence, MutableSequence):
        return _sequence(origin, args, bounds)
    return None  # Any, a class the code passes (an optimizer), a string annotation


def _union(members: tuple[Any, ...], bounds: Range | None) -> Rule | None:
    """``X | None`` and ``A | B``: members a config cannot hold (a tensor) are left out."""
    nullable = type(None) in members
    if int in members and float in members:  # a float takes an integer too: one rule
        members = tuple(member for member in members if member is not int)
    rules = [_typed(m, bounds) for m in members if m is not type(None)]
    known = [rule for rule in rules if rule is not None]
    if not known:
        return None
    rule = known[0] if len(known) == 1 else either(*known)
    return null_or(rule) if nullable else rule


def _sequence(origin: Any, args: tuple[Any, ...], bounds: Range | None) -> Rule | None:
    """A list from the config: ``Sequence[X]``, ``tuple[X, ...]``, or ``tuple[X, Y]`` (fixed)."""
    if origin is tuple and args and args[-1] is not Ellipsis:
        items = [_typed(arg, bounds) or Rule("anything") for arg in args]
        need = f"a list of {len(items)}: " + ", ".join(item.need for item in items)
        example = "[" + ",".join(item.example for item in items) + "]"

        def fixed(value: Any) -> bool:
            return (
                isinstance(value, list)
                and len(value) == len(items)
                and all(item.ok(v) for item, v in zip(items, value, strict=True))
            )

        return Rule(need, example, fixed)
    item = _typed(args[0], bounds) if args else None
    if item is None:
        return list_of(Rule("anything"), example="[]", empty=True)
    return list_of(item, example=f"[{item.example}]", empty=True)


def _bounded(whole: bool, bounds: Range | None) -> Rule:
    """An integer (``whole``) or a finite number within ``bounds``."""
    if bounds is None:
        return integer(example=1) if whole else number(example=0.1)
    example = _inside(bounds, whole)
    low, high = bounds.low, bounds.high
    if whole and bounds.above is None and bounds.below is None and _whole(low) and _whole(high):
        return integer(
            None if low is None else int(low),
            None if high is None else int(high),
            example=int(example),
        )
    rule = number(above=bounds.above, low=low, below=bounds.below, high=high, example=example)
    if not whole:
        return rule
    need = rule.need.replace("a finite number", "an integer")
    return Rule(need, str(int(example)), lambda value: is_int(value) and rule.ok(value))


def _whole(bound: float | None) -> bool:
    return bound is None or float(bound).is_integer()


def _inside(bounds: Range, whole: bool) -> float:
    """A value within ``bounds`` for the message (the declared default replaces it)."""
    for candidate in (bounds.low, bounds.above, bounds.high, bounds.below):
        if candidate is None:
            continue
        for value in (candidate, candidate + 1, candidate - 1, (candidate or 1) / 2):
            value = int(value) if whole else value
            if bounds.contains(value):
                return value
    return 1 if whole else 0.1


# ---- helpers -----------------------------------------------------------------------------


def show(value: Any) -> str:
    """A value as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(show(item) for item in value) + "]"
    return str(value)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def can_be_dir(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    path = Path(value)
    for place in (path, *path.parents):
        if place.exists():
            return place.is_dir()
    return True
