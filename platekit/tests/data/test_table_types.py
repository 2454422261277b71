"""A table's column types come from evidence, one parser reads a cell everywhere.

``2,500`` is a number only when every value groups its digits by threes; ``1,5`` is refused
(a decimal comma, perhaps); ISO dates are days since 1970-01-01; yes/No/TRUE/0/Y is one
feature, or two classes as a target; a constant column is dropped; every problem of a table
comes in one error. The same raw rows, spelled either way, give the same answers through
train's encoding, predict (checkpoint and model.onnx), serve's body reader and the guide's
bare onnxruntime lines (docs/guide.md).
"""

import csv
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_tables import guide_lines, setup

from platekit.data._cells import parse

from support import QUICK, compose_config, module

UserError = module("_errors").UserError
HEADER = "price,day,member,city,const,label"


def table(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


MEMBER = ("yes", "No", "TRUE", "0", "Y", "false")  # 1, 0, 1, 0, 1, 0


def typed_rows(count: int = 120) -> list[str]:
    rows = []
    for i in range(count):
        price = f"{500 + 37 * i:,}" if i % 2 else f"{-1250.5 - i:,}"  # 2,500 and -1,251.5
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" + ("T12:00:00Z" if i % 3 == 0 else "")
        label = "ab"[(i // 2) % 2]
        rows.append(f'"{price}",{day},{MEMBER[i % 6]},{"xyz"[i % 3]},7,{label}')
    return rows


def test_each_column_is_typed_from_its_evidence_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="platekit.data"):
        datamodule = setup(table(tmp_path / "t.csv", typed_rows()))
    columns = {c["name"]: c for c in datamodule.info.table_columns}
    assert columns["price"]["format"] == "grouped"
    assert columns["day"]["format"] == "date"
    assert columns["member"]["format"] == "bool"
    assert "const" not in columns  # one value in every row: dropped
    assert datamodule.info.feature_names == ("price", "day", "member", "city=x", "city=y", "city=z")
    raw = datamodule.rows.inputs
    assert raw[1, 0] == 537.0  # "537" (grouped column, short value)
    assert raw[3, 0] == 611.0
    assert raw[0, 0] == -1250.5  # "-1,250.5"
    assert raw[0, 1] == pytest.approx(parse("2026-01-01T12:00:00Z", "date"))  # 20454.5 days
    assert raw[:6, 2].tolist() == [1, 0, 1, 0, 1, 0]
    said = [r.getMessage() for r in caplog.records]
    for line in (
        "1 number (thousands grouped by ',') column(s): price",
        "1 date column(s) (days since 1970-01-01): day",
        "1 bool column(s) (1 = yes/true, 0 = no/false): member",
        "constant column(s) dropped (one value in every row, nothing to learn): const",
    ):
        assert sum(line in message for message in said) == 1, (line, said)


def test_dates_keep_their_order() -> None:
    days = [
        parse(d, "date") for d in ("1969-12-31", "1970-01-01", "2026-12-01 06:00", "2026-12-02")
    ]
    assert days == sorted(days)
    assert days[:2] == [-1.0, 0.0]
    assert days[2] == pytest.approx(days[3] - 0.75)


def test_mixed_booleans_as_a_target_are_two_classes_named(tmp_path: Path) -> None:
    rows = [f"{i},{MEMBER[i % 6]}" for i in range(120)]
    info = setup(table(tmp_path / "b.csv", rows, "x,label")).info
    assert info.class_names == ("0", "TRUE")  # the commonest spelling of each side
    assert info.num_classes == 2


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        (["1,5", "2,25", "3"], "holds '1,5': a comma that may be a decimal mark"),
        (["2,500", "1500", "3,000"], "mixes thousands written '2,500' and '1500'"),
    ],
)
def test_ambiguous_numbers_are_refused_not_guessed(
    tmp_path: Path, cells: list[str], said: str
) -> None:
    rows = [f'"{cells[i % 3]}",{"ab"[i % 2]}' for i in range(60)]
    with pytest.raises(UserError, match=re.escape(said)):
        setup(table(tmp_path / "n.csv", rows, "amount,label"))


def test_every_problem_of_a_table_comes_in_one_run(tmp_path: Path) -> None:
    rows = [
        f'"{i % 3},5",user{i},"{("2,500", "1500")[i % 2]}",{i},{"ab"[i % 2]}' for i in range(60)
    ]
    with pytest.raises(UserError) as refused:
        setup(table(tmp_path / "p.csv", rows, "rate,user,amount,x,label"))
    message = str(refused.value)
    assert "has 3 problem(s):" in message
    assert "column 'rate' holds '0,5'" in message
    assert re.search(r"column 'user' holds \d+ distinct texts among \d+ train rows", message)
    assert "column 'amount' mixes thousands" in message


def exec_inputs(records: list[dict[str, Any]]) -> Any:
    """The model inputs the guide's lines make of ``records`` (run in the export folder)."""
    scope: dict[str, Any] = {"rows": records}
    exec(compile(guide_lines(), "guide.md", "exec"), scope)
    return scope["inputs"]


@pytest.mark.slow
def test_the_same_rows_read_alike_by_train_predict_serve_and_the_guide_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = table(tmp_path / "t.csv", typed_rows())
    run = [*QUICK, "data=csv", f"data.path={path}", "data.target=label"]
    metrics = module("train").train(compose_config(tmp_path / "run", run), run)
    best = metrics["best_checkpoint"]
    module("export").export(
        compose_config(tmp_path / "export", [f"ckpt_path={best}", "repeats=1"], "export")
    )
    model = tmp_path / "export" / "model.onnx"
    # The same six rows, spelled as in the table and spelled otherwise.
    given = typed_rows()[:6]
    respelled = [
        row.replace('"537"', "537").replace("TRUE", "true").replace("No", "no").replace("Y,", "y,")
        .replace('"-1,250.5"', "-1250.5")
        for row in given
    ]  # fmt: skip
    header = HEADER.rsplit(",", 1)[0]
    inputs = {}
    for name, rows in (("given", given), ("respelled", respelled)):
        table(tmp_path / f"{name}.csv", [row.rsplit(",", 1)[0] for row in rows], header)
    predict = module("predict").predict
    for name in ("given", "respelled"):
        for backend in (best, model):
            cfg = [f"model_path={backend}", f"inputs={tmp_path / f'{name}.csv'}"]
            rows = predict(
                compose_config(tmp_path / f"p-{name}-{Path(backend).suffix}", cfg, "predict")
            )
            inputs[name, str(backend)] = [round(r["probability"], 5) for r in rows]
    assert len(set(map(tuple, inputs.values()))) == 1, inputs  # one answer, four ways
    info = module("models._onnx_runner").OnnxRunner(model).info
    served, _ = module("commands._serving_bodies").decode(
        (tmp_path / "respelled.csv").read_bytes(), "text/csv", info,
        module("commands._serving_bodies").Limits(2**20, 2**20), invert=False,
    )  # fmt: skip
    datamodule = setup(path)  # train's own encoding of the six rows
    np.testing.assert_array_equal(served, datamodule.rows.inputs[:6].numpy())
    records = []
    for row in respelled:
        price, day, member, city, const = next(csv.reader([row]))[:5]
        records.append({"price": price, "day": day, "member": member, "city": city, "const": const})
    far = [{**record, "price": "2,500,000"} for record in records]  # ~1000x the train range
    monkeypatch.chdir(tmp_path / "export")
    for given_rows, out in ((records, False), (far, True)):
        scope: dict[str, Any] = {"rows": given_rows}
        exec(compile(guide_lines(), "guide.md", "exec"), scope)
        assert scope["flagged"].tolist() == [out] * 6  # the range check, from the metadata
    np.testing.assert_array_equal(exec_inputs(records), served)
