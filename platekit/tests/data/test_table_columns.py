"""The columnar reader (``data/_columns.py``) means what the one cell parser means.

Arrow parses a column of plain numbers in C; any column it refuses is read as texts and parsed
by ``cells.py``. So every cell reads the same whichever path it took, quotes, embedded
newlines and ``.gz`` read as the standard library reads them, a bad row is named by its line,
a checkpoint's stored column types win over what its table would be inferred as now, and
export reads only the rows its parity check uses.
"""

import csv
import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from support import QUICK, compose_config, module, run_cli

UserError = module("_errors").UserError
CsvDataModule = module("data._csv").CsvDataModule
columns = module("data._columns")
encoding = module("data._encoding")
cells = module("data._cells")

TRICKY = [
    "1", "-2.5", "+1", ".5", "5.", "1e5", "1E+05", "00012", "1e400", "1e-400", "inf", "-inf",
    "Infinity", "nan", "NaN", "-nan", "1_0", "0x10", "\u0661\u0662", " 1", " 1 ", "\t2", "1,5",
    "", "  ", "NA", "null", "?", "1.2.3", "1e", "e5", "\u22121",
    "0.1000000000000000055511151231257827", "9007199254740993",
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY)
def test_arrow_reads_a_cell_only_as_pythons_float_reads_it(text: str) -> None:
    parsed = columns.parse_numbers(pa.array([text]))
    if parsed is None:  # refused: the column is read as texts, by cells.py
        return
    assert parsed.dtype == np.float32  # the model's type: a table holds no float64 copy
    gap = bool(np.isnan(parsed[0]))  # NaN is a gap, and only a gap
    assert gap == cells.is_gap(text)
    if not gap:
        expected = cells.plain_number(text.strip())
        assert expected is not None, f"Arrow read {text!r}, Python's float does not"
        with np.errstate(over="ignore"):
            assert parsed[0] == np.float32(expected)


def write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([header, *rows])
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(buffer.getvalue().encode()))
    else:
        path.write_text(buffer.getvalue())
    return path


def table_rows(count: int = 90) -> list[list[str]]:
    rows = []
    for i in range(count):
        plain = ["1.5", "", "-2e3", "NA", "7", "0.25"][i % 6]
        spaced = [" 3", "4 ", "5", ""][i % 4]  # Arrow refuses the spaces: texts, then cells.py
        city = ["Lyon", "Saint-\u00c9tienne, Loire", "line\nbreak", ""][i % 4]
        rows.append([plain, spaced, city, f"{i % 7}.{i % 3}", "xyz"[i % 3]])
    return rows


HEADER = ["plain", "spaced", "city", "small", "label"]


def encoded(path: Path) -> tuple[np.ndarray, list[dict[str, Any]]]:
    datamodule = CsvDataModule(path=str(path), target="label")
    datamodule.setup()
    return datamodule.rows.inputs.numpy(), [dict(c) for c in datamodule.info.table_columns]


def test_both_reading_paths_give_the_same_features_as_the_standard_library(
    tmp_path: Path,
) -> None:
    rows = table_rows()
    features, learnt = encoded(write(tmp_path / "t.csv", HEADER, rows))
    names = [column["name"] for column in learnt]
    assert names == ["plain", "spaced", "city", "small"]
    by_hand = {name: [row[HEADER.index(name)] for row in rows] for name in names}
    np.testing.assert_array_equal(features, encoding.encode(learnt, by_hand, "rows"))
    city = next(c for c in learnt if c["name"] == "city")
    # a quoted comma and a quoted newline are inside one cell each
    assert city["values"] == ["Lyon", "Saint-\u00c9tienne, Loire", "line\nbreak"]
    gz_features, gz_learnt = encoded(write(tmp_path / "t.csv.gz", HEADER, rows))
    np.testing.assert_array_equal(gz_features, features)
    assert gz_learnt == learnt


def test_a_bad_row_or_encoding_is_named_as_before(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("a,b,label\n1,2,x\n3,4,y\n5,z\n6,7,x\n")
    with pytest.raises(UserError, match=r"short.csv line 4 has 2 fields, the header 3"):
        encoded(path)
    latin = tmp_path / "latin1.csv"
    latin.write_bytes("a,ville,label\n1,Orl\xe9ans,x\n2,Nice,y\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"is not UTF-8 text \(it holds byte 0xe9"):
        encoded(latin)


def test_a_checkpoints_stored_column_types_win(tmp_path: Path) -> None:
    """A checkpoint from before dates were typed stored a date column as categories: eval,
    export and resume encode it so, not as the days a fresh training would read."""
    rows = [[f"2026-01-{1 + i % 3:02d}", f"{i * 0.5}", "ab"[i % 2]] for i in range(40)]
    path = write(tmp_path / "days.csv", ["day", "x", "label"], rows)
    fresh = CsvDataModule(path=str(path), target="label")
    fresh.setup()
    assert fresh.info.table_columns[0]["format"] == "date"
    stored = [
        {"name": "day", "kind": "category", "values": ["2026-01-01", "2026-01-02", "2026-01-03"]},
        {"name": "x", "kind": "number", "fill": 0.0, "flag": False},
    ]
    old = CsvDataModule(path=str(path), target="label")
    old.use_columns(stored)
    old.setup()
    assert old.feature_names() == ("day=2026-01-01", "day=2026-01-02", "day=2026-01-03", "x")
    np.testing.assert_array_equal(old.rows.inputs[:3, :3].numpy(), np.eye(3))


def test_export_reads_only_the_rows_its_parity_uses(tmp_path: Path) -> None:
    rows = [[f"{i % 11 * 0.3:.1f}", f"{(i * 7) % 5}", "xyz"[i % 3]] for i in range(300)]
    path = write(tmp_path / "t.csv", ["a", "b", "label"], rows)
    run = [*QUICK, "data=csv", f"data.path={path}", "data.target=label"]
    metrics = module("train").train(compose_config(tmp_path / "run", run), run)
    with path.open("a") as handle:  # a row export would fail on, after the rows it reads
        handle.write("1,2\n")
    result = run_cli("export", f"ckpt_path={metrics['best_checkpoint']}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"parity on the first 64 rows of {path}" in result.stdout + result.stderr
