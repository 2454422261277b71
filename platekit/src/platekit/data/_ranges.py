"""The training range of each input feature (or channel), and the inputs outside it.

Recorded from the raw train split (before normalisation) in the checkpoint and in
``model.onnx``'s ``data_info``: per column of a table, per channel of an image, one range for
any other input. predict and serve flag a row holding a value beyond its feature's range by
more than ``MARGIN`` of the range's width (a model's answer there is an extrapolation: raw
0..16 pixels to a model trained on 0..1 were answered wrongly at probability ~1.0).
Sequences (padded, varying length) are not checked. numpy only: predict reads it without
torch.
"""

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

# Beyond the training range by half its width (of |bound|, at least 1, for a constant):
# the wine table's val and test rows reach 0.41 of it past the train split's, diabetes' 0.19.
MARGIN = 0.5
FEATURE, CHANNEL, ALL = "feature", "channel", "all"
SHOWN_ROWS = 10  # how many flagged row indices a message or a response lists


def training_range(blocks: Iterable[np.ndarray], varying: bool = False) -> dict[str, Any]:
    """``{"per": feature|channel|all, "low": [...], "high": [...]}`` of raw train inputs
    given as blocks of rows ``(n, *input_shape)``; empty for sequences or no rows."""
    if varying:
        return {}
    per, low, high = ALL, None, None
    for block in blocks:  # min and max are exact in the inputs' own type: no copy
        if len(block) == 0:
            continue
        axes: tuple[int, ...]
        if block.ndim == 2:
            per, axes = FEATURE, (0,)
        elif block.ndim == 4:
            per, axes = CHANNEL, (0, 2, 3)
        else:
            per, axes = ALL, tuple(range(block.ndim))
        lows, highs = np.atleast_1d(block.min(axis=axes)), np.atleast_1d(block.max(axis=axes))
        low = lows if low is None else np.minimum(low, lows)
        high = highs if high is None else np.maximum(high, highs)
    if low is None or high is None:
        return {}
    return {"per": per, "low": [float(v) for v in low], "high": [float(v) for v in high]}


def check_range(value: Any, input_shape: Sequence[int], source: str) -> None:
    """Raise ValueError unless ``value`` is a range :func:`training_range` could have made."""
    if not value:
        return
    if not isinstance(value, dict) or value.get("per") not in (FEATURE, CHANNEL, ALL):
        raise ValueError(f"{source}: input_range is not a training range")
    low, high = value.get("low"), value.get("high")
    size = {FEATURE: input_shape[0], CHANNEL: input_shape[0], ALL: 1}[value["per"]]
    for bound in (low, high):
        if not isinstance(bound, list | tuple) or len(bound) != size:
            raise ValueError(f"{source}: input_range holds {size} bounds per side")
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in bound):
            raise ValueError(f"{source}: input_range holds a bound that is not a finite number")


def outside(inputs: np.ndarray, value: dict[str, Any], names: Sequence[str] = ()) -> list[str]:
    """Per row of raw ``inputs``: '' if within the range (with ``MARGIN``), else what is out,
    e.g. ``'alcohol=13000 (trained 11.03..14.83)'`` (the first feature out, and how many)."""
    if not value or len(inputs) == 0:
        return [""] * len(inputs)
    low, high = np.asarray(value["low"]), np.asarray(value["high"])
    width = high - low
    slack = MARGIN * np.where(width > 0, width, np.maximum(np.abs(high), 1.0))
    rows = np.asarray(inputs, dtype=np.float64).reshape(len(inputs), -1)
    if value["per"] == FEATURE:
        lo, hi, values = low - slack, high + slack, rows
        extreme = values
    else:  # per channel (or one range): each channel's lowest and highest value in the row
        channels = len(low)
        grouped = rows.reshape(len(rows), channels, -1)
        lo, hi = low - slack, high + slack
        below, above = grouped.min(axis=2), grouped.max(axis=2)
        extreme = np.where(below < lo, below, above)
        values = extreme
    bad = (values < lo) | (values > hi)
    labels = list(names) if value["per"] == FEATURE and len(names) == len(low) else None
    found = []
    for row in range(len(rows)):
        columns = np.flatnonzero(bad[row])
        if not len(columns):
            found.append("")
            continue
        first = int(columns[0])
        name = (
            labels[first]
            if labels
            else (f"channel {first}" if value["per"] == CHANNEL else f"input {first}")
        )
        more = f" and {len(columns) - 1} more" if len(columns) > 1 else ""
        found.append(
            f"{name}={extreme[row, first]:.4g} (trained {low[first]:.4g}..{high[first]:.4g}){more}"
        )
    return found


def summary(flags: Sequence[str]) -> dict[str, Any]:
    """A bounded account of flagged rows: their count and the first ``SHOWN_ROWS`` indices."""
    rows = [index for index, flag in enumerate(flags) if flag]
    return {"count": len(rows), "rows": rows[:SHOWN_ROWS]}
