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
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cli.errors import UserError, inert
from .cells import FORMATS, GROUPED, PLAIN, UNIT, infer_format, is_gap, parse
from .tables import column_index

if TYPE_CHECKING:
    from .info import DataInfo

log = logging.getLogger(__name__)

NUMBER, CATEGORY = "number", "category"
MAX_CATEGORIES = 1000  # more distinct texts than this in a column: an id or free text
MIN_ID_VALUES = 20  # ... and so is a column of more, most rows holding a text of their own
Column = dict[str, Any]


def infer_columns(
    source: Path | str,
    cells: Mapping[str, list[str]],
    train: Sequence[int],
    keep_constant: bool = False,
) -> list[Column]:
    """Each column's encoding, from the evidence of its cells (``cells.py``) and the train
    split's rows (``train``): fills and categories are learnt from those only.

    A constant column (one value, no gap) is dropped with a line, unless ``keep_constant``
    (the user listed the columns). Every problem of the table is collected and reported in
    one error, one line per column.
    """
    columns: list[Column] = []
    problems: list[str] = []
    dropped: list[str] = []
    for name, values in cells.items():
        fmt, problem = infer_format(values)
        if problem is not None:
            problems.append(f"column '{name}' {problem}")
            continue
        seen = [values[row].strip() for row in train]
        present = [cell for cell in seen if not is_gap(cell)]
        whole = {cell.strip() for cell in values}
        if len(whole) == 1 and not is_gap(next(iter(whole))) and not keep_constant:
            dropped.append(name)
            continue
        if fmt is not None:
            numbers = [parse(cell, fmt) for cell in present]
            finite = [n for n in numbers if n is not None and math.isfinite(n)]
            if not finite:
                problems.append(
                    f"column '{name}' has no value in the train split's rows; fill it, or "
                    "leave it out with data.features=[...]"
                )
                continue
            fill = float(np.mean(np.asarray(finite, dtype=np.float64)))
            column = {"name": name, "kind": NUMBER, "fill": fill, "flag": len(present) < len(seen)}
            columns.append(column if fmt == PLAIN else {**column, "format": fmt})
            continue
        categories = sorted(set(present))
        many = len(categories) > MIN_ID_VALUES and len(categories) > 0.5 * len(seen)
        if len(categories) > MAX_CATEGORIES or many:
            problems.append(
                f"column '{name}' holds {len(categories)} distinct texts among {len(seen)} "
                f"train rows (e.g. '{inert(categories[0])}'): an id or free text, not a "
                "category; leave it out with data.features=[...]"
            )
            continue
        columns.append({"name": name, "kind": CATEGORY, "values": categories})
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


def number_columns(
    source: Path | str,
    names: Sequence[str],
    numbers: np.ndarray,
    train: Sequence[int],
    keep_constant: bool = False,
) -> list[Column]:
    """:func:`infer_columns` for columns of plain finite numbers only (``numbers`` (N, C)):
    the fill is the train rows' mean; a constant column is dropped with a line."""
    columns, dropped = [], []
    rows = np.asarray(train, dtype=np.int64)
    for position, name in enumerate(names):
        values = numbers[:, position]
        if not keep_constant and values.min() == values.max():
            dropped.append(name)
            continue
        fill = float(values[rows].mean()) if len(rows) else float(values.mean())
        columns.append({"name": name, "kind": NUMBER, "fill": fill, "flag": False})
    if dropped:
        log.info(
            "table %s: constant column(s) dropped (one value in every row, nothing to learn): %s",
            Path(str(source)).name,
            ", ".join(dropped),
        )
    return columns


def encoded_names(columns: Sequence[Column]) -> tuple[str, ...]:
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
    columns: Sequence[Column], cells: Mapping[str, list[str]], source: Path | str
) -> np.ndarray:
    """The model's float32 inputs ``(N, features)`` for raw cells (one list per column)."""
    count = len(next(iter(cells.values()))) if cells else 0
    parts: list[np.ndarray] = []
    for column in columns:
        name, values = column["name"], cells[column["name"]]
        if column["kind"] == NUMBER:
            fmt = column.get("format", PLAIN)
            value, gap = number_feature(source, name, values, column["fill"], fmt)
            parts.append(value)
            if column["flag"]:
                parts.append(gap.astype(np.float32))
        else:
            position = {category: i for i, category in enumerate(column["values"])}
            onehot = np.zeros((count, len(position)), dtype=np.float32)
            unseen: dict[str, int] = {}
            rows: list[int] = []
            for row, cell in enumerate(values):
                index = position.get(cell.strip())  # a gap or an unseen value: all zeros
                if index is not None:
                    onehot[row, index] = 1.0
                elif not is_gap(cell):
                    unseen[cell.strip()] = unseen.get(cell.strip(), 0) + 1
                    rows.append(row)
            if unseen:
                warn_unseen(source, name, unseen)
                collector = _UNSEEN.get()
                if collector is not None:
                    collector.update(rows)
            parts.append(onehot)
    return np.column_stack(parts).astype(np.float32) if parts else np.zeros((count, 0))


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
    shown = ", ".join(f"'{value}'" for value in sorted(unseen)[:5])
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
    source: Path | str, name: str, values: list[str], fill: float, fmt: str = PLAIN
) -> tuple[np.ndarray, np.ndarray]:
    """A number column as float32 with its gaps filled, and where the gaps were."""
    out = np.empty(len(values), dtype=np.float32)
    gaps = np.zeros(len(values), dtype=bool)
    for row, text in enumerate(values):
        cell = text.strip()
        if is_gap(cell):
            out[row], gaps[row] = fill, True
            continue
        number = parse(cell, fmt)
        if number is None:
            raise UserError(
                f"{source} column '{name}' row {row + 1} holds '{inert(cell)}', not a number"
                f"{'' if fmt == PLAIN else f' ({fmt})'}; the model was trained on numbers "
                "there (leave the cell empty for a gap)"
            )
        out[row] = number
        if not math.isfinite(float(out[row])):
            raise UserError(f"{source} column '{name}' row {row + 1} is {cell}; use finite numbers")
    return out, gaps


def describe(columns: Sequence[Column]) -> list[str]:
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


def encoded_rows(
    header: list[str], rows: list[list[str]], info: "DataInfo", source: Path | str
) -> np.ndarray:
    """The model's inputs for parsed CSV rows holding the training columns (others ignored)."""
    names = [column["name"] for column in info.table_columns]
    missing = [name for name in names if name not in header]
    if missing:
        raise UserError(
            f"input '{source}' lacks the column(s) {', '.join(missing)} the model was trained "
            f"on; it needs {', '.join(names)} (a cell may be empty: a gap)"
        )
    index = column_index(source, header, names)
    cells = {name: [row[index[name]] for row in rows] for name in names}
    return encode(info.table_columns, cells, source).reshape(len(rows), *info.input_shape)


def record_rows(records: list[Any], info: "DataInfo", source: str) -> np.ndarray:
    """The model's inputs for rows given as ``{column: value}`` objects (a JSON body):
    ``None``, ``""``, NaN and a key left out are gaps; texts and numbers are read as in a
    CSV cell."""
    if not all(isinstance(record, Mapping) for record in records):
        raise UserError(f"{source}: mix of objects and other values; send one object per row")
    header = sorted({str(key) for record in records for key in record})  # a key left out

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        return str(value)

    rows = [[cell(record.get(name)) for name in header] for record in records]  # ... is a gap
    return encoded_rows(header, rows, info, source)
