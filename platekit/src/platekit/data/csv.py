"""A CSV table: numeric feature columns and one target column, with no code.

``data=csv data.path=/abs/table.csv data.target=label`` trains on any table with a header
row. The target may hold class names (strings, sorted into class indices), integers
(classes) or real values (a regression); ``data.target_kind`` forces either reading.
"""

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..cli.errors import UserError
from ..runtime.files import write_atomic
from .base import BaseDataModule, Rows
from .examples import read_sklearn_table
from .info import DataInfo
from .tables import MISSING, as_number, numeric_column, pick_columns, read_table

KINDS = ("auto", "class", "value")
WINE_FEATURES = (
    "alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
    "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
    "od280_od315_of_diluted_wines", "proline",
)  # fmt: skip
DIABETES_FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
EXAMPLES = ("wine", "diabetes")


class CsvDataModule(BaseDataModule):
    """Rows of a CSV file; features normalised per column with the train split's statistics.

    Args:
        path: the CSV file (header row first). ``null``: the ``example`` table, written to
            ``data_dir`` on first use from a dataset scikit-learn ships.
        target: the column to predict.
        features: the feature columns, in order; ``null``: every column but the target.
        target_kind: ``auto`` (integers and strings are classes, other numbers a
            regression), ``class`` or ``value``.
        example: ``wine`` (178 wines, 13 measurements, 3 cultivars) or ``diabetes`` (442
            patients, 10 measurements, a disease progression value).
        data_dir: where the example table is written.
        **kwargs: :class:`BaseDataModule`'s arguments (batch sizes, split, seed, ...).
    """

    input_name = "features"

    def __init__(
        self,
        path: str | None = None,
        target: str = "target",
        features: Sequence[str] | None = None,
        target_kind: str = "auto",
        example: str = "wine",
        data_dir: str = "data",
        normalize: str = "feature",
        **kwargs: Any,
    ) -> None:
        super().__init__(normalize=normalize, **kwargs)
        self._columns: tuple[str, ...] = ()

    def read(self) -> Rows:
        options = self.hparams
        if options.target_kind not in KINDS:
            raise UserError(f"data.target_kind={options.target_kind} is not one of {KINDS}")
        if options.path:
            path = Path(options.path)
        else:
            path = write_example(options.example, options.data_dir)
        self.hparams.path = str(path.resolve())  # the checkpoint records where the table was
        header, rows = read_table(path)
        columns = pick_columns(path, header, options.target, options.features)
        self._columns = tuple(columns)
        index = {name: i for i, name in enumerate(header)}
        features = np.empty((len(rows), len(columns)), dtype=np.float32)
        for j, name in enumerate(columns):
            features[:, j] = numeric_column(path, name, [row[index[name]] for row in rows])
        targets, names = target_column(
            path, options.target, [row[index[options.target]] for row in rows], options.target_kind
        )
        return Rows(torch.from_numpy(features), targets, class_names=names)

    def feature_names(self) -> tuple[str, ...]:
        return self._columns

    def describe_input(self, info: DataInfo) -> str:
        return (
            f"float32 (N, {info.input_shape[0]}): the columns {', '.join(self._columns)} of "
            f"{Path(self.hparams.path).name}, raw values as in the file (normalisation is "
            "inside the model); N is free"
        )

    @classmethod
    def make_fixture(cls, directory: Path, target_kind: str = "class") -> dict[str, object]:
        """A small table for the contract tests (3 classes, or a real-valued target for
        ``target_kind="value"``); returns the data overrides."""
        generator = np.random.default_rng(0)
        path = directory / "table.csv"
        lines = ["a,b,c,label"]
        for row in range(120):
            label = row % 3
            a, b, c = generator.normal(loc=(label, -label, 0.5 * label), scale=0.5)
            target = f"{a - 2 * b + c:.4f}" if target_kind == "value" else "xyz"[label]
            lines.append(f"{a:.4f},{b:.4f},{c:.4f},{target}")
        path.write_text("\n".join(lines) + "\n")
        return {"path": str(path), "target": "label", "batch_size": 16}


def target_column(
    path: Path, name: str, values: list[str], kind: str
) -> tuple[torch.Tensor, list[str]]:
    """Class indices and sorted class names, or float values with no class names."""
    cells = [value.strip() for value in values]
    for row, cell in enumerate(cells):
        if cell.lower() in MISSING:
            raise UserError(
                f"{path} target column '{name}' row {row + 1} is empty; fill or drop that row"
            )
    numbers = [as_number(cell) for cell in cells]
    present = [number for number in numbers if number is not None]
    numeric = len(present) == len(numbers)
    integral = numeric and all(float(n).is_integer() for n in present)
    if kind == "value" or (kind == "auto" and numeric and not integral):
        if not numeric:
            row = next(i for i, n in enumerate(numbers) if n is None)
            raise UserError(
                f"{path} target column '{name}' row {row + 1} holds '{cells[row]}', not a "
                "number, but data.target_kind=value; use numbers or target_kind=class"
            )
        return torch.tensor(present, dtype=torch.float32), []
    if integral:  # integer classes, in numeric order
        labels = sorted({int(n) for n in present})
        names = [str(label) for label in labels]
        keys = [str(int(n)) for n in present]
    else:
        names = sorted(set(cells))
        keys = cells
    position = {label: i for i, label in enumerate(names)}
    return torch.tensor([position[key] for key in keys], dtype=torch.int64), names


def write_example(example: str, data_dir: str) -> Path:
    """Write the example table scikit-learn ships as ``<data_dir>/<example>.csv`` if absent."""
    if example not in EXAMPLES:
        raise UserError(f"data.example={example} is not one of {', '.join(EXAMPLES)}")
    path = Path(data_dir) / f"{example}.csv"
    if path.is_file():
        return path
    text = wine_table() if example == "wine" else diabetes_table()
    write_atomic(path, lambda tmp: tmp.write_text(text))
    return path


def wine_table() -> str:
    table = read_sklearn_table("wine_data.csv", skip_rows=1)
    if table is None:
        raise UserError("scikit-learn's wine_data.csv is missing; reinstall scikit-learn")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*WINE_FEATURES, "cultivar"])
    for row in table:
        writer.writerow([*(f"{value:g}" for value in row[:-1]), f"class_{int(row[-1])}"])
    return buffer.getvalue()


def diabetes_table() -> str:
    from .examples import sklearn_data_file

    data_file, target_file = (
        sklearn_data_file("diabetes_data_raw.csv.gz"),
        sklearn_data_file("diabetes_target.csv.gz"),
    )
    if data_file is None or target_file is None:
        raise UserError("scikit-learn's diabetes files are missing; reinstall scikit-learn")
    data, target = np.loadtxt(data_file), np.loadtxt(target_file)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*DIABETES_FEATURES, "progression"])
    for row, value in zip(data, target, strict=True):
        writer.writerow([*(f"{v:g}" for v in row), f"{value:g}"])
    return buffer.getvalue()
