"""Tables as they come: number columns with gaps and text (category) columns, as numbers.

Each column's encoding is learnt from the train split and stored as plain dicts (in the
checkpoint's data card and the exported model's ``data_info`` metadata), so training,
predict, serve and anyone holding ``model.onnx`` turn a raw row into the model's input the
same way:

- a number column: the value, read in the column's format (``cells.py``: plain, thousands
  grouped by ``,``, an ISO date as days since 1970-01-01, yes/no as 1/0, decided from every
  cell of the column); a gap (an empty cell, ``NA``, ``null``, ...) takes the train split's
  mean, and if the train split had gaps in that column a ``<name>_missing`` feature
  is 1 there (0 elsewhere), so the model can tell a filled value from a real one;
- a category column (any cell in it is not a number): one feature per value seen in the
  train split (``<name>=<value>``), 1 for the row's value; a gap or a value the train split
  never held is all zeros.

``{"name": "age", "kind": "number", "fill": 41.2, "flag": true}``
``{"name": "price", "kind": "number", "fill": 2510.0, "flag": false, "format": "grouped"}``
``{"name": "city", "kind": "category", "values": ["Lyon", "Paris"]}``

Plain numpy and the standard library: predict reads tables without torch.
"""

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

from platekit._errors import UserError, inert
from platekit.data._cells import FORMATS, GROUPED, PLAIN, UNIT, infer_format, parse
from platekit.data._columns import Column, Numbers, Texts, as_column

log = logging.getLogger(__name__)

NUMBER, CATEGORY = "number", "category"
MAX_CATEGORIES = 1000  # more distinct texts than this in a column: an id or free text
MIN_ID_VALUES = 20  # ... and so is a column of more, most rows holding a text of their own
ONE_HOT_ROWS = 1 << 16  # rows one-hot encoded at a time
Encoding = dict[str, Any]  # one column's: {"name": ..., "kind": "number", "fill": ...}


def infer_columns(
    source: Path | str,
    cells: Mapping[str, Column | Sequence[str]],
    train: Sequence[int] | np.ndarray,
    keep_constant: bool = False,
) -> list[Encoding]:
    """Each column's encoding, from the evidence of its cells (``cells.py``) and the train
    split's rows (``train``): fills and categories are learnt from those only.

    A constant column (one value, no gap) is dropped with a line, unless ``keep_constant``
    (the user listed the columns). Every problem of the table is collected and reported in
    one error, one line per column.
    """
    rows = np.asarray(train, dtype=np.int64)
    columns: list[Encoding] = []
    problems: list[str] = []
    dropped: list[str] = []
    for name, given in cells.items():
        column = as_column(given)
        fmt, problem = (PLAIN, None) if isinstance(column, Numbers) else infer_format(column.texts)
        if problem is not None:
            problems.append(f"column '{name}' {problem}")
            continue
        if isinstance(column, Texts) and fmt is None:
            constant = len(column.texts) == 1 and not column.gaps()[0]
            encoded, problem = category(column, rows)
        else:
            values, gaps = number_values(column, fmt or PLAIN)
            constant = is_constant(values, gaps)
            encoded, problem = number(values, gaps, rows, fmt or PLAIN)
        if constant and not keep_constant:
            dropped.append(name)
            continue
        if problem is not None:
            problems.append(f"column '{name}' {problem}")
        else:
            columns.append({"name": name, **encoded})
    if dropped:
        log.info(
            "table %s: constant column(s) dropped (one value in every row, nothing to learn): %s",
            Path(str(source)).name,
            ", ".join(dropped),
        )
    if problems:
        listed = "\n".join(f"  {inert(line)}" for line in problems)
        raise UserError(f"{source} has {len(problems)} problem(s):\n{listed}")
    return columns


def number_values(column: Column, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """A number column's float32 values (NaN at gaps) and gaps, each row read in format
    ``fmt``: a column is judged (constant or not, its fill) as the model will see it."""
    if isinstance(column, Numbers):
        return column.values, column.gaps
    gap = column.gaps()
    parsed = [math.nan if gap[i] else parse(text, fmt) for i, text in enumerate(column.texts)]
    values = np.asarray([math.nan if v is None else v for v in parsed], dtype=np.float64)
    with np.errstate(over="ignore"):  # in float32, as the model takes them and Numbers hold them
        return values.astype(np.float32)[column.codes], gap[column.codes]


def is_constant(values: np.ndarray, gaps: np.ndarray) -> bool:
    """One value in every row, no gap."""
    return bool(len(values)) and not gaps.any() and bool(values.min() == values.max())


def number(
    values: np.ndarray, gaps: np.ndarray, rows: np.ndarray, fmt: str
) -> tuple[Encoding, str | None]:
    """A number column's encoding: the train rows' mean fills its gaps."""
    train = values[rows][~gaps[rows]]
    finite = train[np.isfinite(train)]
    if not len(finite):
        return {}, (
            "has no value in the train split's rows; fill it, or leave it out with "
            "data.features=[...]"
        )
    fill = float(finite.mean(dtype=np.float64))
    encoded = {"kind": NUMBER, "fill": fill, "flag": bool(gaps[rows].any())}
    return (encoded if fmt == PLAIN else {**encoded, "format": fmt}), None


def category(column: Texts, rows: np.ndarray) -> tuple[Encoding, str | None]:
    """A text column's encoding: one feature per value the train rows hold."""
    gap = column.gaps()
    held = np.unique(column.codes[rows])
    values = sorted(column.texts[code] for code in held.tolist() if not gap[code])
    many = len(values) > MIN_ID_VALUES and len(values) > 0.5 * len(rows)
    if len(values) > MAX_CATEGORIES or many:
        return {}, (
            f"holds {len(values)} distinct texts among {len(rows)} train rows (e.g. "
            f"'{inert(values[0])}'): an id or free text, not a category; leave it out with "
            "data.features=[...]"
        )
    return {"kind": CATEGORY, "values": values}, None


def text_columns(columns: Sequence[Encoding]) -> list[str]:
    """The columns of a stored encoding that must be read as texts (all but plain numbers)."""
    return [
        column["name"]
        for column in columns
        if column["kind"] != NUMBER or column.get("format", PLAIN) != PLAIN
    ]


def encoded_names(columns: Sequence[Encoding]) -> tuple[str, ...]:
    """The name of each feature the model takes, in order."""
    names: list[str] = []
    for column in columns:
        if column["kind"] == NUMBER:
            names.append(column["name"])
            if column["flag"]:
                names.append(f"{column['name']}_missing")
        else:
            names += [f"{column['name']}={value}" for value in column["values"]]
    return tuple(names)


def encode(
    columns: Sequence[Encoding],
    cells: Mapping[str, Column | Sequence[str]],
    source: Path | str,
) -> np.ndarray:
    """The model's float32 inputs ``(N, features)`` for raw cells (one column each)."""
    count = len(next(iter(cells.values()))) if cells else 0
    out = np.empty((count, len(encoded_names(columns))), dtype=np.float32)
    start = 0
    for encoding in columns:
        name, column = encoding["name"], as_column(cells[encoding["name"]])
        if encoding["kind"] == NUMBER:
            fmt = encoding.get("format", PLAIN)
            gap = number_feature(source, name, column, encoding["fill"], fmt, out[:, start])
            start += 1
            if encoding["flag"]:
                out[:, start] = gap
                start += 1
        else:
            width = len(encoding["values"])
            one_hot(source, name, column, encoding["values"], out[:, start : start + width])
            start += width
    return out


def one_hot(
    source: Path | str, name: str, column: Column, values: Sequence[str], out: np.ndarray
) -> None:
    """A category column as one feature per trained value, written into ``out`` (N, values);
    a gap or an unseen value is all zeros (unseen ones are said, and collected for serve's
    answer)."""
    if isinstance(column, Numbers):  # read_columns(texts=...) reads stored categories as texts
        raise ValueError(f"category column '{name}' was read as numbers")
    texts = column
    position = {value: i for i, value in enumerate(values)}
    gap = texts.gaps()
    index = np.asarray([position.get(text, -1) for text in texts.texts], dtype=np.int64)
    out[:] = 0.0
    if len(index):
        for start in range(0, len(texts), ONE_HOT_ROWS):  # temporaries of a block's size
            per_row = index[texts.codes[start : start + ONE_HOT_ROWS]]
            known = np.flatnonzero(per_row >= 0)
            out[start + known, per_row[known]] = 1.0
    unseen_texts = (index < 0) & ~gap
    if unseen_texts.any():
        unseen_rows = np.flatnonzero(unseen_texts[texts.codes])
        counts = np.bincount(texts.codes[unseen_rows], minlength=len(index))
        warn_unseen(source, name, {texts.texts[i]: int(counts[i]) for i in np.flatnonzero(counts)})
        collector = _UNSEEN.get()
        if collector is not None:
            collector.update(unseen_rows.tolist())


_UNSEEN: ContextVar[set[int] | None] = ContextVar("unseen_rows", default=None)


@contextmanager
def unseen_rows() -> Iterator[set[int]]:
    """Collect the rows holding a category value the train split never held, while encoding
    in this context (serve reports them in its answer)."""
    rows: set[int] = set()
    token = _UNSEEN.set(rows)
    try:
        yield rows
    finally:
        _UNSEEN.reset(token)


def warn_unseen(source: Path | str, name: str, unseen: dict[str, int]) -> None:
    """Say which values of a category column the train split never held (all zeros)."""
    shown = ", ".join(f"'{inert(value)}'" for value in sorted(unseen)[:5])
    more = f" and {len(unseen) - 5} more" if len(unseen) > 5 else ""
    log.warning(
        "%s column '%s': %d row(s) hold values the train split never held (%s%s); they "
        "encode as all zeros, as a gap does",
        source,
        name,
        sum(unseen.values()),
        shown,
        more,
    )


def number_feature(
    source: Path | str,
    name: str,
    column: Column,
    fill: float,
    fmt: str = PLAIN,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """A number column as float32 with its gaps filled, written into ``out`` (a new array if
    None); returns where the gaps were."""
    if isinstance(column, Numbers) and fmt != PLAIN:  # see text_columns
        raise ValueError(f"{fmt} column '{name}' was read as plain numbers")
    if out is None:
        out = np.empty(len(column), dtype=np.float32)
    if isinstance(column, Texts):
        gap = column.gaps()
        parsed = [None if gap[i] else parse(text, fmt) for i, text in enumerate(column.texts)]
        bad = next((i for i, v in enumerate(parsed) if v is None and not gap[i]), None)
        if bad is not None:
            raise UserError(
                f"{source} column '{name}' row {column.row_of(bad) + 1} holds "
                f"'{inert(column.texts[bad])}', not a number{'' if fmt == PLAIN else f' ({fmt})'}"
                "; the model was trained on numbers there (leave the cell empty for a gap)"
            )
        per_text = np.asarray([fill if v is None else v for v in parsed], dtype=np.float64)
        with np.errstate(over="ignore"):
            out[:] = per_text.astype(np.float32)[column.codes]
        gaps = gap[column.codes]
    else:
        gaps = column.gaps
        with np.errstate(over="ignore"):
            np.copyto(out, column.values)
            out[gaps] = fill
    infinite = np.flatnonzero(~np.isfinite(out))
    if len(infinite):
        row = int(infinite[0])
        raise UserError(
            f"{source} column '{name}' row {row + 1} holds {cell_text(column, row)}: infinite, "
            "or beyond float32's range (about 3.4e38); use finite numbers"
        )
    return gaps


def cell_text(column: Column, row: int) -> str:
    """Row ``row``'s cell as the file holds it (Texts), or its value (Numbers)."""
    if isinstance(column, Texts):
        return f"'{inert(column.texts[int(column.codes[row])])}'"
    return str(column.values[row])


def describe(columns: Sequence[Encoding]) -> list[str]:
    """What was inferred, one line per kind of column: each column named once."""
    numbers = [c for c in columns if c["kind"] == NUMBER]
    flagged = [c["name"] for c in numbers if c["flag"]]
    categories = [c for c in columns if c["kind"] == CATEGORY]
    lines = []
    by_format: dict[str, list[str]] = {}
    for column in numbers:
        by_format.setdefault(column.get("format", PLAIN), []).append(column["name"])
    for fmt, names in by_format.items():
        kind = {PLAIN: "number", GROUPED: "number (thousands grouped by ',')"}.get(fmt, fmt)
        unit = f" ({UNIT[fmt]})" if fmt in UNIT else ""
        lines.append(f"{len(names)} {kind} column(s){unit}: {', '.join(names)}")
    if numbers:
        gaps = f"; gaps in {', '.join(flagged)} flagged (<name>_missing)" if flagged else ""
        lines[0] += f"{gaps}; a gap takes the train mean"
    if categories:
        listed = ", ".join(f"{c['name']} ({len(c['values'])} values)" for c in categories)
        lines.append(
            f"{len(categories)} category column(s), one feature per train value: {listed}; "
            "a gap or an unseen value is all zeros"
        )
    return [inert(line) for line in lines]


def check_columns(columns: Any, width: int, source: str) -> None:
    """Raise ValueError unless ``columns`` is a list of encodings ``width`` features wide."""
    if not isinstance(columns, list | tuple):
        raise ValueError(f"{source}: table_columns is not a list")
    for column in columns:
        if not isinstance(column, Mapping) or not isinstance(column.get("name"), str):
            raise ValueError(f"{source}: a table column is not a mapping with a name")
        if column.get("kind") == NUMBER:
            fill, flag = column.get("fill"), column.get("flag")
            if not isinstance(fill, int | float) or not math.isfinite(fill):
                raise ValueError(f"{source}: column {column['name']} has no finite fill value")
            if not isinstance(flag, bool):
                raise ValueError(f"{source}: column {column['name']} has no flag true/false")
            if column.get("format", PLAIN) not in FORMATS:
                raise ValueError(f"{source}: column {column['name']} has an unknown format")
        elif column.get("kind") == CATEGORY:
            values = column.get("values")
            if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
                raise ValueError(f"{source}: column {column['name']} has no list of values")
        else:
            raise ValueError(f"{source}: column {column['name']} is not a number or category")
    if columns and len(encoded_names(columns)) != width:
        raise ValueError(
            f"{source}: table_columns encode {len(encoded_names(columns))} features, the "
            f"model takes {width}"
        )
