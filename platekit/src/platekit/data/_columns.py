"""A table's columns, read in blocks at C speed and held compactly.

pyarrow tokenises the CSV (quotes, embedded newlines, ``.gz``) block by block; nothing holds
a Python string per cell. Each column comes back in one of two forms:

- :class:`Numbers`: every cell a plain number or a gap, parsed by Arrow and kept as float32
  (the model's type), NaN at the gaps. Arrow's parser reads only texts Python's ``float``
  reads, to the same value (tests/data/test_table_columns.py); a column it refuses (``1,500``,
  `` 1.5``, a date, a text, ``-nan``) is read again as texts, so the meaning of a cell is
  always ``cells.py``'s.
- :class:`Texts`: each distinct (stripped) text once and a code per row (the smallest
  unsigned integer type that holds the count of texts).

``encoding.py`` types and encodes both with the one parser of ``cells.py``; predict and serve
build :class:`Texts` from their few rows (``Texts.of``).
"""

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from platekit._errors import UserError
from platekit.data._cells import GAPS, is_gap
from platekit.data._memory import return_freed_memory

# Arrow's buffers come from malloc (``batches`` sets the pool before Arrow's first use,
# unless ARROW_DEFAULT_MEMORY_POOL names another): its own allocators reserve ~1.2 GiB of
# address space at first use (jemalloc; a run under `ulimit -v` then fails in OpenBLAS) or
# hold freed memory (mimalloc: ~100 MiB more for the 1,000,000-row benchmark table).
POOL = "ARROW_DEFAULT_MEMORY_POOL"

BLOCK_BYTES = 1 << 20  # Arrow reads this much text at a time (more: no faster, more memory)
SPACES = " \t"  # trimmed by Arrow before parsing: characters str.strip() trims too
PER_TEXT = 150  # bytes a distinct text holds beside its characters: str, dict slot, list entry


def text_load(
    path: Path, header: list[str], names: Sequence[str], texts: Sequence[str] = ()
) -> float:
    """Bytes per byte of the table that the distinct texts of its text columns will hold as
    Python strings, estimated from the table's first block: a column whose cells there are
    mostly distinct (an id, free text, a regression target's values) holds a string per row.
    What reading holds besides is ``memory.READER``; 0 for a table of numbers and categories."""
    import pyarrow.compute as pc

    index = [header.index(name) for name in names]
    try:
        first = next(batches(path, header, index), None)
    except UserError:
        return 0.0  # the reader names a broken file
    if first is None or first.num_rows == 0:
        return 0.0
    rows = first.num_rows
    per_row = 0.0
    for name, i in zip(names, index, strict=True):
        column = first.column(f"c{i}")
        if name not in texts and parse_numbers(column) is not None:
            continue  # numbers: float32, in READER
        distinct = pc.count_distinct(column).as_py()
        if distinct > rows / 2:
            length = pc.mean(pc.utf8_length(column)).as_py() or 0.0
            per_row += distinct / rows * (length + PER_TEXT)
    block = min(BLOCK_BYTES, max(path.stat().st_size, 1))  # the bytes of the first block
    return per_row / (block / rows)


@dataclass(frozen=True)
class Texts:
    """A column as its distinct stripped texts and, per row, the index of its text."""

    texts: list[str]
    codes: np.ndarray  # unsigned integers (rows,)

    @classmethod
    def of(cls, cells: Iterable[str]) -> "Texts":
        index: dict[str, int] = {}
        codes = [index.setdefault(cell.strip(), len(index)) for cell in cells]
        return cls(list(index), np.asarray(codes, dtype=code_type(len(index))))

    def __len__(self) -> int:
        return len(self.codes)

    def gaps(self) -> np.ndarray:
        """Per text, whether it is a gap (an empty cell, ``NA``, ``null``, ...)."""
        return np.asarray([is_gap(text) for text in self.texts], dtype=bool)

    def row_of(self, text: int) -> int:
        """The first row (from 0) that holds text number ``text``."""
        return int(np.flatnonzero(self.codes == text)[0])

    def cells(self) -> list[str]:
        """Every row's text (for a target column's few distinct values, or small inputs)."""
        return [self.texts[code] for code in self.codes.tolist()]


@dataclass(frozen=True)
class Numbers:
    """A column whose every cell is a plain number or a gap: the values, NaN at a gap (and
    only there: a column with a NaN cell that is not a gap is read as texts)."""

    values: np.ndarray  # float32 (rows,): a value beyond float32's range is +-inf

    def __len__(self) -> int:
        return len(self.values)

    @property
    def gaps(self) -> np.ndarray:
        """Per row, whether the cell is a gap."""
        return np.isnan(self.values)


Column = Texts | Numbers


def as_column(cells: Column | Sequence[str]) -> Column:
    return cells if isinstance(cells, Texts | Numbers) else Texts.of(cells)


def read_columns(
    path: Path, header: list[str], names: Sequence[str], texts: Sequence[str] = ()
) -> dict[str, Column]:
    """The columns ``names`` of the CSV table at ``path`` (its ``header`` read already), as
    :class:`Numbers` where every cell is a plain number or a gap, else :class:`Texts`; the
    columns in ``texts`` always as :class:`Texts`.

    A file Arrow cannot read (a row of the wrong length, bytes that are not UTF-8) is read by
    the standard library's reader, whose line names the row; ``MemoryError`` passes up.
    """
    with return_freed_memory():  # nested in a data module's setup: a no-op
        return read_all(path, header, names, texts)


def read_all(
    path: Path, header: list[str], names: Sequence[str], texts: Sequence[str]
) -> dict[str, Column]:
    """:func:`read_columns`' reading, in two passes: numbers first, then the texts."""
    index = {name: header.index(name) for name in names}
    pending: dict[str, list[np.ndarray]] = {name: [] for name in names if name not in texts}
    refused: set[str] = set()
    for batch in batches(path, header, [index[name] for name in pending]) if pending else ():
        for name in list(pending):
            parsed = parse_numbers(batch.column(f"c{index[name]}"))
            if parsed is None:
                refused.add(name)
                del pending[name]
            else:
                pending[name].append(parsed)
    columns: dict[str, Column] = {}
    for name in list(pending):
        parts = pending.pop(name)  # freed column by column: no second copy of the table
        columns[name] = Numbers(np.concatenate(parts) if parts else np.zeros(0, np.float32))
        del parts
    as_texts = [name for name in names if name in texts or name in refused]
    if as_texts:
        coders = {name: TextCoder() for name in as_texts}
        for batch in batches(path, header, [index[name] for name in as_texts], dictionary=True):
            for name in as_texts:
                coders[name].add(batch.column(f"c{index[name]}"))
        columns.update({name: coders[name].column() for name in as_texts})
    return {name: columns[name] for name in names}


def batches(
    path: Path, header: list[str], wanted: list[int], dictionary: bool = False
) -> Iterator[Any]:
    """The table's rows in Arrow record batches of the ``wanted`` columns (``c<index>``), every
    cell a string (``dictionary``: dictionary-encoded per batch)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if os.environ.get(POOL, "system") == "system":
        pa.set_memory_pool(pa.system_memory_pool())
    names = [f"c{i}" for i in range(len(header))]
    kind = pa.dictionary(pa.int32(), pa.string()) if dictionary else pa.string()
    include = [names[i] for i in wanted]
    read = (
        pcsv.ReadOptions(  # one thread: no malloc arena per thread (64 MiB of address space each)
            column_names=names, skip_rows=1, block_size=BLOCK_BYTES, use_threads=False
        )
    )
    parse = pcsv.ParseOptions(newlines_in_values=True)
    convert = pcsv.ConvertOptions(
        column_types={name: kind for name in include}, include_columns=include,
        null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False,
    )  # fmt: skip
    try:
        stream = pa.input_stream(str(path), compression="detect")
        with pcsv.open_csv(stream, read, parse, convert) as reader:
            yield from reader
    except pa.ArrowInvalid as error:
        raise reread_error(path, error) from None


def reread_error(path: Path, error: Exception) -> UserError:
    """The standard library reader's line for a table Arrow refused (it names the row)."""
    from platekit.data._tables import read_table

    try:
        read_table(path)
    except UserError as named:
        return named
    return UserError(f"data.path '{path}' is not a readable CSV file ({error})")


def parse_numbers(strings: Any) -> np.ndarray | None:
    """Float32 values of an Arrow string array, NaN at its gaps; None if a cell that is not a
    gap is not a plain number to Arrow, or is NaN (the column is then read as texts)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    trimmed = pc.utf8_trim(strings, characters=SPACES)
    gaps = pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(sorted(GAPS)))
    if pc.any(pc.match_substring(trimmed, "_")).as_py():  # 1_000: float reads it, we do not
        return None
    try:
        values = pc.cast(pc.if_else(gaps, "nan", trimmed), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if pc.any(pc.and_(pc.is_nan(values), pc.invert(gaps))).as_py():  # -nan: not a gap
        return None
    with np.errstate(over="ignore"):  # beyond float32's range: inf, refused when encoded
        return values.to_numpy(zero_copy_only=False).astype(np.float32)


class TextCoder:
    """Codes a column's texts batch by batch: one table of distinct stripped texts."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.parts: list[np.ndarray] = []

    def add(self, encoded: Any) -> None:
        mapping = np.asarray(
            [self.index.setdefault(text.strip(), len(self.index)) for text in
             encoded.dictionary.to_pylist()], dtype=np.int32,
        )  # fmt: skip
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        self.parts.append(mapping[indices] if len(mapping) else indices.astype(np.int32))

    def column(self) -> Texts:
        kind = code_type(len(self.index))
        codes = np.empty(sum(len(part) for part in self.parts), dtype=kind)
        start = 0
        while self.parts:  # each batch's codes freed as it is copied
            part = self.parts.pop(0)
            codes[start : start + len(part)] = part
            start += len(part)
        return Texts(list(self.index), codes)


def code_type(count: int) -> type[np.unsignedinteger[Any]]:
    """The smallest unsigned integer type that numbers ``count`` texts."""
    for kind in (np.uint8, np.uint16, np.uint32):
        if count <= np.iinfo(kind).max + 1:
            return kind
    return np.uint64
