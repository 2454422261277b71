"""A component's settings are its ``__init__`` parameters: declared once, beside its code.

A class a config names by ``_target_`` (a data module, a net, a task, an optimizer, a
schedule, a callback, a logger) declares what its config node may hold by its constructor,
and nothing else does::

    from typing import Annotated
    from platekit.settings import Range

    class NoisyDigits(DigitsDataModule):
        def __init__(self, noise: Annotated[float, Range(low=0)] = 0.0, **kwargs: Any) -> None:
            super().__init__(**kwargs)

- the parameter's name is the key (``data.noise``), so ``data.nosie=0.1`` is refused
  naming the nearest settings, before any run directory exists;
- its annotation is what a value must be: ``int``, ``float`` (an integer is taken too),
  ``bool``, ``str``, ``Path``, ``Literal[...]``, ``X | None``, ``Sequence[X]`` / ``list[X]`` /
  ``tuple[X, ...]`` / ``tuple[X, Y]``, ``dict`` / ``Mapping``. Anything else (``Any``, a
  tensor, the optimizer a schedule is handed) is passed on unchecked, as is a parameter
  without an annotation;
- ``Annotated[int | float, Range(...)]`` adds bounds (optional), beside the parameter;
- ``**kwargs`` hands the rest to the parent class: the parent's parameters are settings
  too, following the MRO until an ``__init__`` without ``**kwargs``. A subclass that
  declares nothing (no ``__init__``) has its parent's settings.

A parameter without a default that the config leaves out is not a problem: the code that
builds the class passes it (a net's ``input_shape``, a schedule's ``optimizer``). Checks that
need more than one value or the data itself (split fractions adding up, a file existing, a
column name) stay where the value is used, such as the data module's setup: one place each.

This module imports nothing beyond the standard library, so any component may import it.
"""

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any

EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class Range:
    """Bounds of a number setting: ``>= low``, ``<= high``, ``> above``, ``< below``.

    Each is optional. ``example``: a good value for messages (default: the parameter's
    default).
    """

    low: float | None = None
    high: float | None = None
    above: float | None = None
    below: float | None = None
    example: Any = None

    def contains(self, value: float) -> bool:
        return (
            (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
            and (self.above is None or value > self.above)
            and (self.below is None or value < self.below)
        )


@dataclass(frozen=True)
class Setting:
    """One parameter of a component's ``__init__``: its name, annotation and default."""

    name: str
    annotation: Any  # as written (``Annotated`` kept); ``EMPTY`` when there is none
    default: Any  # ``EMPTY`` when the code passes it
    owner: type  # the class whose ``__init__`` declares it

    @property
    def where(self) -> str:
        return f"{self.owner.__qualname__}.__init__"


@dataclass(frozen=True)
class Settings:
    """What a class's config node may hold.

    ``open``: an ``__init__`` takes ``**kwargs`` that reach no parent declaring them (any
    key is taken, unchecked).
    """

    cls: type
    named: Mapping[str, Setting] = field(default_factory=dict)
    open: bool = False

    def __contains__(self, name: object) -> bool:
        return self.open or name in self.named


@cache
def settings_of(cls: type) -> Settings:
    """The settings of ``cls``: its ``__init__``'s parameters, and its parents' via ``**kwargs``."""
    named: dict[str, Setting] = {}
    forwards = False  # whether the last __init__ seen hands **kwargs on
    for owner in cls.__mro__:
        if "__init__" not in vars(owner):
            continue  # inherits the next one's
        if owner is object:  # takes nothing: **kwargs that reach it are used, not passed on
            return Settings(cls, named, open=forwards)
        init = vars(owner)["__init__"]
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]  # not self
        except (TypeError, ValueError):  # a builtin's: nothing known
            return Settings(cls, named, open=True)
        hints = _hints(init)
        forwards = False
        for parameter in parameters:
            if parameter.kind is parameter.VAR_KEYWORD:
                forwards = True
            elif parameter.kind is not parameter.VAR_POSITIONAL:
                annotation = hints.get(parameter.name, parameter.annotation)
                if parameter.name not in named:
                    named[parameter.name] = Setting(
                        parameter.name, annotation, parameter.default, owner
                    )
                else:  # re-declared below (another default): the parent's range still holds
                    named[parameter.name] = inherit_range(named[parameter.name], annotation)
        if not forwards:
            return Settings(cls, named)
    return Settings(cls, named, open=True)


def inherit_range(setting: Setting, parent_annotation: Any) -> Setting:
    """``setting`` with the range its parent declares for it, if it declares none itself."""
    if setting.annotation is EMPTY or ranges_in(setting.annotation):
        return setting
    inherited = ranges_in(parent_annotation)
    if not inherited:
        return setting
    return Setting(
        setting.name, annotated(setting.annotation, inherited[-1]), setting.default, setting.owner
    )


def annotated(annotation: Any, bounds: Range) -> Any:
    """``Annotated[annotation, bounds]``, built at run time."""
    return typing.cast(Any, Annotated)[annotation, bounds]


def ranges_in(annotation: Any) -> list[Range]:
    """The ranges ``annotation`` declares, at its top or in a union's member."""
    if typing.get_origin(annotation) is Annotated:
        own = [meta for meta in annotation.__metadata__ if isinstance(meta, Range)]
        return own or ranges_in(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [found for member in typing.get_args(annotation) for found in ranges_in(member)]
    return []  # a list's items' ranges are the items' own


def _hints(function: Any) -> dict[str, Any]:
    """The evaluated annotations of ``function`` (``Annotated`` kept); ``{}`` if they fail."""
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # a forward reference that does not resolve: the raw annotations
        return {}
