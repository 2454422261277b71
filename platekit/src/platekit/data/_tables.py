"""Read CSV tables: a header row, then rows; every bad cell is one line naming it.

Plain numpy and the standard library, so predict can read tables without torch.
"""

import csv
import gzip
import itertools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

import numpy as np

from platekit._errors import UserError
from platekit.data._cells import GAPS as MISSING

T = TypeVar("T")


def read_table(
    path: Path, what: str = "data.path", limit: int | None = None
) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a CSV file (plain or .gz), every row as long as the header;
    only the first ``limit`` rows are read if given.

    ``what`` names the setting the path came from, for the messages.
    """
    return read_text(path, what, lambda handle: parse_table(handle, path, what, limit))


def read_header(path: Path, what: str = "data.path") -> list[str]:
    """The header row of a CSV file, read as :func:`read_table` reads it, its rows unread."""

    def header(handle: TextIO) -> list[str]:
        try:
            first = next(csv.reader(handle), [])
        except csv.Error as error:
            raise UserError(f"{what} '{path}' is not a readable CSV file ({error})") from error
        return [name.strip() for name in first]

    return read_text(path, what, header)


def read_text(path: Path, what: str, read: Callable[[TextIO], T]) -> T:
    """``read`` of the UTF-8 text of a CSV file (plain or .gz); one line for each way it fails."""
    if not path.is_file():
        raise UserError(
            f"{what} '{path}' is not a file; pass the CSV table's path, e.g. {what}=/abs/table.csv"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", newline="", encoding="utf-8-sig") as handle:
            return read(handle)
    except UnicodeDecodeError as error:
        raise UserError(
            f"{what} '{path}' is not UTF-8 text (it holds byte {error.object[error.start]:#x}: a "
            "Latin-1 or Windows export?); save it as UTF-8, e.g. iconv -f latin1 -t utf-8 "
            "in.csv > out.csv"
        ) from None
    except OSError as error:
        raise UserError(f"{what} '{path}' is not a readable CSV file ({error})") from error


def parse_table(
    text: Iterable[str], source: Path | str, what: str = "data.path", limit: int | None = None
) -> tuple[list[str], list[list[str]]]:
    """The header and rows (the first ``limit``, if given) of CSV text (lines, an open file),
    named ``source`` in messages."""
    try:
        rows = (line for line in csv.reader(text) if line)  # blank lines carry no row
        lines = list(rows if limit is None else itertools.islice(rows, limit + 1))
    except csv.Error as error:
        raise UserError(f"{what} '{source}' is not a readable CSV file ({error})") from error
    if len(lines) < 2:
        raise UserError(f"{what} '{source}' holds no rows under its header; add data")
    header = [name.strip() for name in lines[0]]
    for number, line in enumerate(lines[1:], start=2):
        if len(line) != len(header):
            raise UserError(
                f"{source} line {number} has {len(line)} fields, the header {len(header)}; "
                "fix that row"
            )
    return header, lines[1:]


def pick_columns(
    path: Path, header: list[str], target: str, features: Sequence[str] | None
) -> list[str]:
    """The feature columns, checked against the header."""
    wanted = [target, *(features or [])]
    for name in wanted:
        if name not in header:
            raise UserError(
                f"{path} has no column '{name}'; its columns are {', '.join(header)} "
                "(set data.target / data.features)"
            )
    if features:
        if target in features:
            raise UserError(f"data.features lists the target column '{target}'; remove it")
        column_index(path, header, features)
        return list(features)
    if "" in header:  # a feature of no name: most often a saved row index, a leak
        raise UserError(
            f"{path} column {header.index('') + 1} has no name in the header (a saved row "
            "index, as pandas' to_csv writes?); name it, or pick the feature columns with "
            "data.features=[...]"
        )
    columns = [name for name in header if name != target]
    column_index(path, header, columns)
    return columns


def column_index(source: Path | str, header: list[str], names: Sequence[str]) -> dict[str, int]:
    """Where each of ``names`` is in ``header``; a name two columns share is refused (which
    one is meant cannot be known)."""
    index: dict[str, int] = {}
    wanted = set(names)
    for position, name in enumerate(header):
        if name in wanted and name in index:
            raise UserError(
                f"{source} has two columns named '{name}' (columns {index[name] + 1} and "
                f"{position + 1}); rename one"
            )
        index.setdefault(name, position)
    return index


def numeric_column(path: Path | str, name: str, values: list[str]) -> np.ndarray:
    """A feature column as float32; a missing or non-numeric cell is one line naming it."""
    out = np.empty(len(values), dtype=np.float32)
    for row, text in enumerate(values):
        cell = text.strip()
        if cell.lower() in MISSING:
            raise UserError(
                f"{path} column '{name}' row {row + 1} is missing a value; fill or drop "
                "that row (rows count from 1 under the header)"
            )
        try:
            out[row] = float(cell)
        except ValueError:
            raise UserError(
                f"{path} column '{name}' row {row + 1} holds '{cell}', not a number; "
                "features must be numeric (encode it, or leave the column out with "
                "data.features=[...])"
            ) from None
        if not np.isfinite(out[row]):
            raise UserError(f"{path} column '{name}' row {row + 1} is {cell}; use finite numbers")
    return out
