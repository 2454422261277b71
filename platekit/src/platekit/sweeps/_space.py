"""The search space: ``sweep.params`` of configs/hparams_search/*.yaml as Optuna suggestions.

Each entry maps an override path to a sweep in Hydra's override syntax:

    optimizer.lr: tag(log, interval(0.0003, 0.01))   # float, log scale
    model.net.dropout: interval(0.0, 0.3)                   # float, uniform
    trainer.max_epochs: int(interval(5, 20))                # int, both ends included
    model.net.depth: range(2, 6)                            # int 2..5 (range excludes the end)
    data.batch_size: choice(32, 64, 128)                    # one of the listed values

A key is only an override path, so any config key can be searched. On the command line a
range is quoted, else Hydra reads it as a sweep of its own:
``'+sweep.params.model.net.width="choice(64, 128)"'``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.errors import HydraException
from optuna.distributions import (
    BaseDistribution,
    CategoricalChoiceType,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import Trial

from platekit._errors import UserError

SYNTAX = (
    "interval(low, high), tag(log, interval(low, high)), int(interval(...)), range(...) "
    "or choice(...)"
)


@dataclass(frozen=True)
class Param:
    """One searched config key and the values it may take."""

    key: str
    distribution: BaseDistribution


def flat_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"net": {"width": ...}}}`` (as ``+sweep.params.model.net.width=...`` on the
    command line makes it) as ``{"model.net.width": ...}``; flat keys stay as they are."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            flat |= flat_params(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def parse_space(params: Mapping[str, Any]) -> list[Param]:
    """``{key: "interval(0.0, 0.3)", ...}`` as Params, in the order given."""
    parser = OverridesParser.create()
    space = []
    for key, text in params.items():
        try:
            override = parser.parse_override(f"{key}={text}")
            space.append(Param(str(key), _distribution(override)))
        except (HydraException, ValueError, TypeError) as error:
            raise UserError(
                f"sweep.params.{key}={text!s} is not a search range ({error}); write {SYNTAX}"
            ) from None
    return space


def _distribution(override: Override) -> BaseDistribution:
    sweep = override.value()
    log = "log" in getattr(sweep, "tags", ())
    if isinstance(sweep, ChoiceSweep):
        return CategoricalDistribution([_choice(value) for value in sweep.list])
    if isinstance(sweep, IntervalSweep):
        if sweep.start is None or sweep.end is None:
            raise ValueError("interval() takes a start and an end")
        if isinstance(sweep.start, int) and isinstance(sweep.end, int):
            return IntDistribution(sweep.start, sweep.end, log=log)
        return FloatDistribution(float(sweep.start), float(sweep.end), log=log)
    if isinstance(sweep, RangeSweep):
        found = list(override.sweep_iterator())  # start, start + step, ... < stop
        values = [value for value in found if isinstance(value, int)]
        if not values or len(values) != len(found):
            raise ValueError("range() takes integers and must not be empty")
        step = values[1] - values[0] if len(values) > 1 else 1
        return IntDistribution(values[0], values[-1], step=step)
    raise ValueError("a single value, not a range")


def _choice(value: object) -> CategoricalChoiceType:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"choice() takes numbers, strings, booleans or null, not {value!r}")


def suggest(trial: Trial, param: Param) -> Any:
    """Ask the trial for this parameter's value (the sampler picks it)."""
    dist = param.distribution
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(param.key, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(param.key, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(param.key, dist.low, dist.high, step=dist.step, log=dist.log)


def as_override(key: str, value: Any) -> str:
    """``key=value`` in Hydra's override syntax (strings quoted, floats exact)."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{key}={text}"
