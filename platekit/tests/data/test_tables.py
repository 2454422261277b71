"""Tables as they come: number columns with gaps, text columns as categories, the target's
kind decided from evidence; predict, serve and bare onnxruntime take the raw rows."""

import logging
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from support import GUIDE, QUICK, compose_config, module

UserError = module("_errors").UserError
csv_data = module("data._csv")
encoding = module("data._encoding")
CsvDataModule = csv_data.CsvDataModule
DataInfo = module("data._info").DataInfo


def table(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def setup(path: Path, **settings: Any) -> Any:
    datamodule = CsvDataModule(path=str(path), **{"target": "label", **settings})
    datamodule.setup()
    return datamodule


def mixed_rows(count: int = 60) -> list[str]:
    rows = []
    for i in range(count):
        city = ("Paris", "Lyon", "Nice")[i % 3]
        age = "" if i % 7 == 0 else str(20 + i % 30)
        plan = "" if i % 5 == 0 else ("basic", "pro")[i % 2]
        rows.append(f"{age},{city},{plan},{i % 4 * 0.5},{'yes' if i % 3 else 'no'}")
    return rows


def test_texts_are_categories_and_gaps_are_filled_from_the_train_split(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = table(tmp_path / "t.csv", "age,city,plan,score,label", mixed_rows())
    with caplog.at_level(logging.INFO, logger="platekit.data._csv"):
        datamodule = setup(path)
    info = datamodule.info
    columns = {column["name"]: column for column in info.table_columns}
    assert columns["city"] == {
        "name": "city",
        "kind": "category",
        "values": ["Lyon", "Nice", "Paris"],
    }
    assert columns["plan"]["values"] == ["basic", "pro"]  # a gap is no category of its own
    assert columns["score"] == {
        "name": "score",
        "kind": "number",
        "fill": pytest.approx(
            float(np.mean([i % 4 * 0.5 for i in datamodule.parts["train"].tolist()]))
        ),
        "flag": False,
    }
    train = datamodule.parts["train"].tolist()
    ages = [20 + i % 30 for i in train if i % 7]
    assert columns["age"]["fill"] == pytest.approx(np.mean(ages))  # the train rows' mean only
    assert columns["age"]["flag"] is True
    assert info.feature_names == (
        "age", "age_missing", "city=Lyon", "city=Nice", "city=Paris", "plan=basic", "plan=pro",
        "score",
    )  # fmt: skip
    assert info.input_shape == (8,)
    raw = datamodule.rows.inputs
    row0 = raw[0].tolist()  # age gap, Paris, plan gap, score 0
    assert row0 == pytest.approx([columns["age"]["fill"], 1, 0, 0, 1, 0, 0, 0.0])
    # What was inferred: one line per kind of column, and the target's.
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "2 number column(s): age, score; gaps in age flagged" in lines[0]
    assert (
        "2 category column(s), one feature per train value: city (3 values), plan (2 values)"
        in lines[1]
    )
    assert "target label: 2 classes, it holds texts" in lines[2]


def test_a_raw_row_encodes_as_in_training_unseen_values_and_gaps_included(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = table(tmp_path / "t.csv", "age,city,plan,score,label", mixed_rows())
    info = setup(path).info
    inputs = module("data._inputs")
    header = ["score", "plan", "city", "age", "extra"]  # any order, other columns ignored
    rows = [["1.5", "pro", "Oslo", "", "x"], ["NA", "", "Lyon", "33", "y"]]
    with caplog.at_level(logging.WARNING):
        encoded = inputs.table_array(header, rows, info, "rows")
    assert [r.getMessage() for r in caplog.records] == [
        "rows column 'city': 1 row(s) hold values the train split never held ('Oslo'); they "
        "encode as all zeros, as a gap does"
    ]
    fills = {c["name"]: c.get("fill") for c in info.table_columns}
    np.testing.assert_allclose(  # age, age_missing, city x3, plan x2, score
        encoded,
        [[fills["age"], 1, 0, 0, 0, 0, 1, 1.5], [33, 0, 1, 0, 0, 0, 0, fills["score"]]],
        rtol=1e-6,
    )
    with pytest.raises(UserError, match=r"lacks the column\(s\) plan the model was trained on"):
        inputs.table_array(["age", "city", "score"], [["1", "Lyon", "2"]], info, "rows")
    with pytest.raises(UserError, match=r"column 'age' row 1 holds 'old', not a number"):
        inputs.table_array(header, [["1", "pro", "Lyon", "old", ""]], info, "rows")


def test_a_json_file_of_rows_reads_as_the_csv_of_the_same_rows(tmp_path: Path) -> None:
    """predict takes a .json of ``{column: value}`` rows, as serve takes the same body."""
    info = setup(table(tmp_path / "t.csv", "age,city,plan,score,label", mixed_rows())).info
    inputs = module("data._inputs")
    rows = table(tmp_path / "rows.csv", "age,city,plan,score", ["33,Lyon,pro,1.5", ",Nice,,"])
    expected = inputs.read_inputs([rows], info)[0]
    records = '[{"age": 33, "city": "Lyon", "plan": "pro", "score": 1.5}, {"city": "Nice"}]'
    for name, text in [
        ("list.json", records),
        ("wrapped.json", f'{{"inputs": {records}}}'),
    ]:
        (tmp_path / name).write_text(text)
        read, names = inputs.read_inputs([tmp_path / name], info)
        np.testing.assert_array_equal(read, expected)
        assert names == [f"{tmp_path / name}[0]", f"{tmp_path / name}[1]"]
    (tmp_path / "one.json").write_text('{"age": 33, "city": "Lyon", "plan": "pro", "score": 1.5}')
    one = inputs.read_inputs([tmp_path / "one.json"], info)[0]
    np.testing.assert_array_equal(one, expected[:1])


def test_an_id_column_is_refused_naming_data_features(tmp_path: Path) -> None:
    rows = [f"{i},user{i:04d},{i % 2}" for i in range(80)]
    path = table(tmp_path / "t.csv", "x,user,label", rows)
    with pytest.raises(
        UserError, match=r"column 'user' holds \d+ distinct texts .* data\.features"
    ):
        setup(path)
    assert setup(path, features=["x"]).info.feature_names == ("x",)


def test_an_unnamed_or_twice_named_column_is_refused_not_guessed(tmp_path: Path) -> None:
    """pandas' to_csv writes the row index as a column of no name: a feature that would leak
    the row order; two columns of one name: which one is meant is unknown."""
    rows = [f"{i},{i % 3 * 1.5},{'yes' if i % 2 else 'no'}" for i in range(60)]
    path = table(tmp_path / "index.csv", ",x,label", rows)
    with pytest.raises(UserError, match=r"column 1 has no name .* data\.features=\[\.\.\.\]"):
        setup(path)
    assert setup(path, features=["x"]).info.feature_names == ("x",)
    path = table(tmp_path / "twice.csv", "x,y,x,label", [f"{i},1,{-i},no" for i in range(60)])
    with pytest.raises(UserError, match=r"two columns named 'x' \(columns 1 and 3\); rename"):
        setup(path)
    info = setup(path, features=["y"]).info
    assert info.feature_names == ("y",)
    inputs = module("data._inputs")
    with pytest.raises(UserError, match=r"two columns named 'y' \(columns 1 and 2\)"):
        inputs.table_array(["y", "y"], [["1", "2"]], info, "rows")
    np.testing.assert_array_equal(  # a name the model does not read may repeat
        inputs.table_array(["x", "y", "x"], [["1", "2", "3"]], info, "rows"), [[2.0]]
    )


def test_a_checkpoint_refuses_a_table_that_no_longer_reads_as_its_own(tmp_path: Path) -> None:
    """eval and export rebuild the data from the file: another table behind the path (a
    category renamed, a class added) would shift the one-hot columns or the class indices."""
    check_same_data = module("checkpoints._restore").check_same_data
    rows = mixed_rows()
    info = setup(table(tmp_path / "t.csv", "age,city,plan,score,label", rows)).info
    same = setup(table(tmp_path / "moved.csv", "age,city,plan,score,label", rows))
    check_same_data(info, same, "a.ckpt")  # the same table elsewhere: fine
    renamed = [row.replace("Lyon", "Zurich") for row in rows]
    other = setup(table(tmp_path / "renamed.csv", "age,city,plan,score,label", renamed))
    with pytest.raises(
        UserError,
        match=r"no longer reads as checkpoint 'a.ckpt' was trained on: its feature names "
        r"differ \(new \['city=Zurich'\], gone \['city=Lyon'\]\); pass the data",
    ):
        check_same_data(info, other, "a.ckpt")
    more = [*rows, *[row.rsplit(",", 1)[0] + ",maybe" for row in rows[:20]]]
    other = setup(table(tmp_path / "classes.csv", "age,city,plan,score,label", more))
    with pytest.raises(UserError, match=r"its class names differ \(new \['maybe'\], gone \[\]\)"):
        check_same_data(info, other, "a.ckpt")


def test_a_table_not_in_utf8_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("x,ville,label\n1,Orl\xe9ans,a\n".encode("latin-1"))
    read_table = module("data._tables").read_table
    with pytest.raises(
        UserError, match=r"is not UTF-8 text \(it holds byte 0xe9: .*save it as UTF-8"
    ):
        read_table(path)


def test_the_target_kind_follows_the_evidence(tmp_path: Path) -> None:
    # scikit-learn's diabetes table: 214 distinct whole numbers among 442 rows is a value.
    diabetes = csv_data.write_example("diabetes", str(tmp_path))
    info = setup(diabetes, target="progression").info
    assert (info.target_kind, info.class_names) == ("value", ())
    whole = [f"{i % 5},{i % 3}" for i in range(60)]  # 3 whole numbers, 20 rows each: classes
    assert setup(table(tmp_path / "c.csv", "x,label", whole)).info.class_names == ("0", "1", "2")
    written = [f"{i},{i % 30}.0" for i in range(300)]  # whole numbers written as reals
    assert setup(table(tmp_path / "r.csv", "x,label", written)).info.target_kind == "value"
    binary = [f"{i},{i % 2}.0" for i in range(60)]  # 0.0/1.0: classes written as reals?
    with pytest.raises(UserError, match=r"2 distinct whole numbers among 60 rows, written as "):
        setup(table(tmp_path / "b.csv", "x,label", binary))
    unclear = [f"{i},{i % 30}" for i in range(300)]  # 30 values, 10 rows each: either reading
    with pytest.raises(UserError) as refused:
        setup(table(tmp_path / "u.csv", "x,label", unclear))
    message = str(refused.value)
    assert "\n" not in message
    assert "30 distinct whole numbers among 300 rows" in message
    assert "data.target_kind=class or data.target_kind=value" in message
    forced = setup(tmp_path / "u.csv", target_kind="class").info
    assert forced.num_classes == 30


def guide_lines() -> str:
    """The guide's lines (docs/guide.md) that apply model.onnx's table encoding with
    onnxruntime."""
    guide = GUIDE.read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
    [block] = [b for b in blocks if "table_columns" in b]
    return block


@pytest.mark.slow
def test_bare_onnxruntime_with_the_guide_lines_gives_predicts_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = CsvDataModule.make_fixture(tmp_path)  # numbers with gaps, a category with gaps
    data = [f"data.{key}={value}" for key, value in settings.items()]
    run = [*QUICK, "data=csv", "trainer.max_epochs=3", *data]  # no model=: the MLP
    metrics = module("train").train(compose_config(tmp_path / "run", run), run)
    assert metrics["test"]["test/acc"] > 0.6
    best = metrics["best_checkpoint"]
    card = torch.load(best, weights_only=True)["data"]["info"]
    assert [c["name"] for c in card["table_columns"]] == ["a", "b", "c", "d"]  # the mapping
    export = [f"ckpt_path={best}", "repeats=1", f"+data.path={settings['path']}"]
    module("export").export(compose_config(tmp_path / "export", export, "export"))

    rows = [  # raw rows: strings, empty cells, None, NaN, an unseen category
        {"a": 0.5, "b": -1.2, "c": 0.1, "d": "red"},
        {"a": None, "b": "", "c": 0.3, "d": "green"},
        {"a": float("nan"), "b": 0.4, "c": -0.2, "d": None},
        {"a": "1.5", "b": -0.5, "c": 0.0, "d": "purple"},
        {"a": "NA", "b": " n/a ", "c": "?", "d": "null"},  # the texts training read as gaps
    ]
    scope: dict[str, Any] = {"rows": rows}
    monkeypatch.chdir(tmp_path / "export")  # the guide's lines open "model.onnx"
    exec(compile(guide_lines(), "guide.md", "exec"), scope)
    _, probabilities = scope["outputs"]
    assert scope["GAPS"] == module("data._tables").MISSING  # the guide's gaps are training's

    def cell(value: Any) -> str:
        return (
            "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        ).strip()

    csv_path = table(
        tmp_path / "rows.csv", "a,b,c,d", [",".join(map(cell, r.values())) for r in rows]
    )
    model = tmp_path / "export" / "model.onnx"
    predict = module("predict").predict
    predicted = predict(
        compose_config(tmp_path / "p", [f"model_path={best}", f"inputs={csv_path}"], "predict")
    )
    from_onnx = predict(
        compose_config(tmp_path / "q", [f"model_path={model}", f"inputs={csv_path}"], "predict")
    )
    assert [r["class"] for r in predicted] == probabilities.argmax(1).tolist()
    assert [r["class"] for r in from_onnx] == probabilities.argmax(1).tolist()
    np.testing.assert_allclose(
        [r["probability"] for r in predicted], probabilities.max(1), atol=1e-5
    )
    np.testing.assert_allclose(
        [r["probability"] for r in from_onnx], probabilities.max(1), atol=1e-6
    )
    print("bare onnxruntime probabilities:", probabilities.max(1).round(4).tolist())
    print("predict from ckpt:", [round(r["probability"], 4) for r in predicted])


def test_a_model_file_whose_table_columns_do_not_fit_is_refused() -> None:
    columns = [
        {"name": "age", "kind": "number", "fill": 40.0, "flag": True},
        {"name": "city", "kind": "category", "values": ["Lyon", "Paris"]},
    ]
    plain = {"input_shape": [4], "target_kind": "value", "table_columns": columns}
    assert DataInfo.from_dict(plain).table_columns[1]["values"] == ["Lyon", "Paris"]
    with pytest.raises(ValueError, match="table_columns encode 4 features, the model takes 5"):
        DataInfo.from_dict({**plain, "input_shape": [5]}, "model.onnx")
    broken = [{**columns[0], "fill": float("nan")}, columns[1]]
    with pytest.raises(ValueError, match="column age has no finite fill value"):
        DataInfo.from_dict({**plain, "table_columns": broken}, "model.onnx")
    with pytest.raises(ValueError, match="column city is not a number or category"):
        DataInfo.from_dict({**plain, "table_columns": [columns[0], {"name": "city"}]}, "x")
