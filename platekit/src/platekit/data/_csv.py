"""A CSV table: feature columns and one target column, with no code.

``data=csv data.path=/abs/table.csv data.target=label`` trains on any table with a header
row. Feature columns hold numbers (gaps filled from the train split) or texts (categories,
one feature per value): ``encoding.py``. The target may hold class names (strings, sorted
into class indices), whole numbers (classes when there are few distinct ones) or real
values (a regression); ``data.target_kind`` forces either reading.
"""

import csv
import io
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from platekit._errors import UserError
from platekit._files import write_atomic
from platekit.data import _encoding as encoding
from platekit.data._base import BaseDataModule, Rows
from platekit.data._cells import BOOL, GROUPED, PLAIN, infer_format, parse
from platekit.data._columns import Texts, read_columns, text_load
from platekit.data._examples import example_file, read_example_table
from platekit.data._info import DataInfo
from platekit.data._memory import READER, check_features, check_memory, out_of_memory
from platekit.data._tables import pick_columns, read_header

log = logging.getLogger(__name__)

KINDS = ("auto", "class", "value")
MAX_CLASSES = 20  # whole-number targets: up to this many distinct values are classes ...
ROWS_PER_CLASS = 2  # ... when the rows hold at least this many per value on average
MIN_VALUES = 50  # more distinct whole numbers than this, or than ROWS_PER_VALUE share of
ROWS_PER_VALUE = 5  # the rows, make a real-valued target; in between, the user decides
WINE_FEATURES = (
    "alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
    "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
    "od280_od315_of_diluted_wines", "proline",
)  # fmt: skip
DIABETES_FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
EXAMPLES = ("wine", "diabetes")


class CsvDataModule(BaseDataModule):
    """Rows of a CSV file, encoded with the train split's statistics (gaps filled, texts as
    categories) and normalised per feature.

    Args:
        path: the CSV file (header row first). ``null``: the ``example`` table, written to
            ``data_dir`` on first use from a table platekit ships.
        target: the column to predict (one: several are refused, as multi-target is not
            supported).
        features: the feature columns, in order; ``null``: every column but the target.
        target_kind: ``auto`` (decided from the column: texts and few distinct whole
            numbers are classes, numbers with a fraction or a ``.0`` and many distinct whole
            numbers a regression; unclear evidence stops with one line), ``class`` or
            ``value``.
        example: ``wine`` (178 wines, 13 measurements, 3 cultivars) or ``diabetes`` (442
            patients, 10 measurements, a disease progression value).
        data_dir: where the example table is written.
        **kwargs: :class:`BaseDataModule`'s arguments (batch sizes, split, seed, ...).
    """

    input_name = "features"

    def __init__(
        self,
        path: str | None = None,
        target: str | list[str] = "target",
        features: Sequence[str] | None = None,
        target_kind: str = "auto",
        example: str = "wine",
        data_dir: str = "data",
        normalize: str = "feature",
        **kwargs: Any,
    ) -> None:
        super().__init__(normalize=normalize, **kwargs)
        self._columns: tuple[str, ...] = ()
        self._encoding: list[encoding.Encoding] = []
        self._stored: tuple[encoding.Encoding, ...] | None = None

    def read(self) -> Rows:
        """The table's rows as encoded features and targets.

        The columns' encodings are learnt from the train split's rows (the split is seeded
        first), or taken from a checkpoint's (``use_columns``) so new rows encode as the
        trained model's did. Memory is checked before the cells are read.
        """
        options = self.hparams
        if not isinstance(options.target, str):
            raise UserError(
                f"data.target={list(options.target)} names {len(options.target)} columns; one "
                "target column is supported (multi-target is not): train one model per target"
            )
        if options.target_kind not in KINDS:
            raise UserError(f"data.target_kind={options.target_kind} is not one of {KINDS}")
        if options.path:
            path = Path(options.path)
        else:
            path = write_example(options.example, options.data_dir)
        self.hparams.path = str(path.resolve())  # the checkpoint records where the table was
        if options.features is not None and not list(options.features):
            raise UserError(
                "data.features=[] names no column; list the feature columns, or leave it "
                "unset (null: every column but the target)"
            )
        header = read_header(path)
        columns = pick_columns(path, header, options.target, options.features)
        self._columns = tuple(columns)
        texts = [options.target, *encoding.text_columns(self._stored or ())]
        wanted = [*columns, options.target]
        check_memory(path, READER + text_load(path, header, wanted, texts))
        try:
            cells = read_columns(path, header, wanted, texts)
        except MemoryError:
            raise out_of_memory(path) from None
        labels = cells.pop(options.target)
        assert isinstance(labels, Texts)
        if self._stored is None:  # learnt from the train split only: the seeded split setup makes
            train = self._seeded_split(len(labels))["train"].numpy()
            self._encoding = encoding.infer_columns(path, cells, train, bool(options.features))
            del train
        else:  # a checkpoint's: its rows encode as they did when it was trained
            self._encoding = list(self._stored)
        check_features(path, len(labels), len(encoding.encoded_names(self._encoding)))
        try:
            features = encoding.encode(self._encoding, cells, path)
        except MemoryError:
            raise out_of_memory(path) from None
        del cells
        targets, names, why = target_column(path, options.target, labels, options.target_kind)
        kind = f"{len(names)} classes" if names else "a real value (regression)"
        target = f"target {options.target}: {kind}, {why}"
        for line in [*encoding.describe(self._encoding), target]:
            log.info("table %s: %s", path.name, line)
        return Rows(torch.from_numpy(features), targets, class_names=names)

    def use_columns(self, columns: Sequence[encoding.Encoding]) -> None:
        """Encode the table as a checkpoint's training did (its stored column types, fills
        and categories) instead of learning them again: eval, export and resume."""
        self._stored = tuple(dict(column) for column in columns)

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        if self._info is not None and not self._info.table_columns:  # how raw rows encode
            self._info = replace(self._info, table_columns=tuple(self._encoding))

    def feature_names(self) -> tuple[str, ...]:
        return encoding.encoded_names(self._encoding)

    def describe_input(self, info: DataInfo) -> str:
        plain = all(c["kind"] == encoding.NUMBER and not c["flag"] for c in self._encoding)
        if plain:
            return (
                f"float32 (N, {info.input_shape[0]}): the columns {', '.join(self._columns)} "
                f"of {Path(self.hparams.path).name}, raw values as in the file "
                "(normalisation is inside the model); N is free"
            )
        return (
            f"float32 (N, {info.input_shape[0]}): the columns {', '.join(self._columns)} of "
            f"{Path(self.hparams.path).name}, encoded as data_info.table_columns says (gaps "
            "take the train mean, with a <name>_missing flag where the train split had gaps; "
            "a category is one feature per train value, all zeros for a gap or an unseen "
            "value); normalisation is inside the model; N is free"
        )

    @classmethod
    def make_fixture(cls, directory: Path, target_kind: str = "class") -> dict[str, object]:
        """A small table for the contract tests: numbers with gaps (``a``, ``b``), a
        category column with gaps (``d``), and 3 classes, or a real-valued target in the
        hundreds of thousands (a price) for ``target_kind="value"``; returns the data
        overrides."""
        generator = np.random.default_rng(0)
        path = directory / "table.csv"
        colours = ("red", "green", "blue")
        lines = ["a,b,c,d,label"]
        for row in range(120):
            label = row % 3
            a, b, c = generator.normal(loc=(label, -label, 0.5 * label), scale=0.5)
            colour = colours[label] if generator.random() < 0.7 else colours[row % 2]
            value = 2e5 + 5e4 * (a - 2 * b + c) + 1e4 * colours.index(colour)
            target = f"{value:.2f}" if target_kind == "value" else "xyz"[label]
            cells = [f"{a:.4f}", f"{b:.4f}", f"{c:.4f}", colour]
            if row % 9 == 4:
                cells[0] = ""  # a gap in a number column
            if row % 11 == 6:
                cells[1] = "NA"
            if row % 13 == 2:
                cells[3] = ""  # a gap in the category column
            lines.append(",".join([*cells, target]))
        path.write_text("\n".join(lines) + "\n")
        return {"path": str(path), "target": "label", "batch_size": 16}


def target_column(
    path: Path, name: str, column: Texts, kind: str
) -> tuple[torch.Tensor, list[str], str]:
    """Class indices and sorted class names, or float values with no class names; and why
    (the evidence, or the setting)."""
    texts, codes = column.texts, column.codes
    gap = column.gaps()
    if gap.any():
        row = min(column.row_of(i) for i in np.flatnonzero(gap).tolist())
        raise UserError(
            f"{path} target column '{name}' row {row + 1} is empty; fill or drop that row"
        )
    fmt, problem = infer_format(texts)
    if problem is not None:
        raise UserError(f"{path} target column '{name}' {problem}")
    counts = np.bincount(codes, minlength=len(texts))
    if fmt == BOOL and kind in ("auto", "class") and len(texts) > 2:  # yes/No/TRUE/0
        flags = np.asarray([int(parse(text, BOOL) or 0) for text in texts], dtype=np.int64)
        names = [spelling(texts, flags, counts, side) for side in (0, 1)]
        why = f"it holds yes/no values in {len(texts)} spellings, read as two classes"
        return torch.from_numpy(flags[codes]), names, why
    numbers = [parse(text, fmt) if fmt in (PLAIN, GROUPED) else None for text in texts]
    numeric = all(number is not None for number in numbers)
    why = f"as data.target_kind={kind}"
    if kind == "auto":
        kind, why = target_kind(path, name, texts, numbers if numeric else None, len(codes))
    if kind == "value":
        if not numeric:
            bad = next(i for i, n in enumerate(numbers) if n is None)
            raise UserError(
                f"{path} target column '{name}' row {column.row_of(bad) + 1} holds "
                f"'{texts[bad]}', not a number, but data.target_kind=value; use numbers or "
                "target_kind=class"
            )
        values = np.asarray(numbers, dtype=np.float32)
        return torch.from_numpy(values[codes]), [], why
    if numeric and all(float(n).is_integer() for n in numbers if n is not None):
        labels = sorted({int(n) for n in numbers if n is not None})  # classes in numeric order
        names = [str(label) for label in labels]
        keys = [str(int(n)) for n in numbers if n is not None]
    else:
        names = sorted(set(texts))
        keys = texts
    position = {label: i for i, label in enumerate(names)}
    per_text = np.asarray([position[key] for key in keys], dtype=np.int64)
    return torch.from_numpy(per_text[codes]), names, why


def spelling(texts: list[str], flags: np.ndarray, counts: np.ndarray, side: int) -> str:
    """The commonest spelling of one side (0: no, 1: yes) of a yes/no column, as its class name."""
    spellings = [i for i in range(len(texts)) if flags[i] == side]
    if not spellings:
        return ("no", "yes")[side]
    best = max(sorted(spellings, key=lambda i: texts[i]), key=lambda i: int(counts[i]))
    return texts[best]


def target_kind(
    path: Path, name: str, texts: list[str], numbers: Sequence[float | None] | None, rows: int
) -> tuple[str, str]:
    """``class`` or ``value`` for ``data.target_kind=auto`` from the column's evidence, and
    the evidence in words, from the column's distinct ``texts``, their ``numbers`` (None: not
    all are numbers) and its count of ``rows``.

    Texts are classes, numbers with a fraction a regression. Whole numbers are classes when
    few distinct values each cover several rows, a regression when there are many
    (scikit-learn's diabetes table: 214 values among 442 rows) or when written as reals
    (``151.0``, ``1e3``); where the evidence is weak or conflicts (few values written as
    reals), the user is asked in one line.
    """
    if numbers is None:
        return "class", "it holds texts"
    if not all(n is not None and float(n).is_integer() for n in numbers):
        return "value", "it holds numbers with a fraction"
    distinct = len(set(numbers))
    evidence = f"{distinct} distinct whole numbers among {rows} rows"
    few = distinct <= MAX_CLASSES and rows >= ROWS_PER_CLASS * distinct
    if any(mark in text.lower() for text in texts for mark in (".", "e")):
        if not few:
            return "value", f"{evidence}, written as reals (e.g. 1.0)"
        evidence += ", written as reals (e.g. 1.0)"  # few values, yet reals: unclear
    elif few:
        return "class", evidence
    elif distinct > MIN_VALUES or rows < ROWS_PER_VALUE * distinct:
        return "value", evidence
    raise UserError(
        f"{path} target column '{name}' holds {evidence}: classes or a real value? set "
        "data.target_kind=class or data.target_kind=value"
    )


def write_example(example: str, data_dir: str) -> Path:
    """Write the example table platekit ships as ``<data_dir>/<example>.csv`` if absent."""
    if example not in EXAMPLES:
        raise UserError(f"data.example={example} is not one of {', '.join(EXAMPLES)}")
    path = Path(data_dir) / f"{example}.csv"
    if path.is_file():
        return path
    text = wine_table() if example == "wine" else diabetes_table()
    write_atomic(path, lambda tmp: tmp.write_text(text))
    return path


def wine_table() -> str:
    table = read_example_table("wine_data.csv", skip_rows=1)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*WINE_FEATURES, "cultivar"])
    for row in table:
        writer.writerow([*(f"{value:g}" for value in row[:-1]), f"class_{int(row[-1])}"])
    return buffer.getvalue()


def diabetes_table() -> str:
    data = np.loadtxt(example_file("diabetes_data_raw.csv.gz"))
    target = np.loadtxt(example_file("diabetes_target.csv.gz"))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*DIABETES_FEATURES, "progression"])
    for row, value in zip(data, target, strict=True):
        writer.writerow([*(f"{v:g}" for v in row), f"{value:g}"])
    return buffer.getvalue()
