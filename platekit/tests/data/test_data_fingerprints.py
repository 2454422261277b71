"""A checkpoint knows its data: eval and resume refuse rows that are not the ones it trained on.

Every training checkpoint holds a fingerprint per split (row count, a digest in split order,
an order-free digest). A table grown, shrunk, shuffled or edited, an image replaced under its
name, a team's own ``read()`` giving other rows: each is refused in one line naming the split
and what differs. ``new_data=true`` evaluates other rows on purpose, encoded as training
encoded its own, and its figures are predict's. A checkpoint this project sealed follows its
own data paths from anywhere; any other reads no data path outside the project.
"""

import logging
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from own_rows import write_rows
from platekit._errors import UserError
from platekit.checkpoints._integrity import CHECKSUM_KEY, SEAL_KEY, content_checksum
from platekit.testing import predict_rows, raw_test_split, write_image_folder

from support import FIXTURES, QUICK, compose_config, module, read_json, run_cli

train, evaluate = module("train").train, module("eval").evaluate
OLD = FIXTURES / "platekit-0.2"
EPOCH = ["trainer.max_epochs=1", "callbacks.early_stopping=null"]


def table_rows(count: int, seed: int = 0) -> list[str]:
    generator = random.Random(seed)
    rows = []
    for index in range(count):
        label = index % 3
        a, b = generator.gauss(label, 1), generator.gauss(-label, 1)
        rows.append(f"{a:.4f},{b:.4f},{generator.random():.4f},{'xyz'[label]}")
    return rows


def write_table(path: Path, rows: list[str]) -> Path:
    path.write_text("a,b,c,label\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def table_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run on 250 rows of a table outside the project (its own: sealed)."""
    root = tmp_path_factory.mktemp("table")
    table = write_table(root / "table.csv", table_rows(300)[:250])
    overrides = [*QUICK, *EPOCH, "data=csv", f"data.path={table}", "data.target=label"]
    metrics = train(compose_config(root / "run", overrides))
    return {"table": table, "ckpt": metrics["best_checkpoint"], "metrics": metrics, "root": root}


def eval_config(directory: Path, checkpoint: str, *extra: str) -> Any:
    return compose_config(
        directory, [f"ckpt_path={checkpoint}", "callbacks.progress_bar=null", *extra], "eval"
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("grown", "the test split is not the one .* 45 rows where it had 37"),
        ("shrunk", "the test split is not the one .* 30 rows where it had 37"),
        ("shuffled", "content differs \\(the data holds the same rows in another order"),
        ("edited", "37 rows, but their content differs"),
    ],
)
def test_a_changed_table_is_refused_naming_the_split_and_the_change(
    table_run: dict[str, Any], tmp_path: Path, change: str, said: str
) -> None:
    rows = table_rows(300)
    changed = {
        "grown": rows,
        "shrunk": rows[:200],
        "shuffled": random.Random(1).sample(rows[:250], 250),
        "edited": [row.replace(".", ".9", 1) for row in rows[:250]],
    }[change]
    table = write_table(tmp_path / "table.csv", changed)
    cfg = eval_config(tmp_path / "eval", table_run["ckpt"], f"+data.path={table}")
    with pytest.raises(UserError, match=f"{said}.*or evaluate this data as new rows on purpose"):
        evaluate(cfg)


def test_the_same_table_evaluates_as_the_run_tested_it(
    table_run: dict[str, Any], tmp_path: Path
) -> None:
    metrics = evaluate(eval_config(tmp_path, table_run["ckpt"]))
    assert metrics["test"]["test/acc"] == table_run["metrics"]["test"]["test/acc"]


def test_new_data_on_purpose_is_every_row_as_predict_answers(
    table_run: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    grown = write_table(tmp_path / "grown.csv", table_rows(300))
    caplog.set_level(logging.INFO)
    cfg = eval_config(tmp_path / "eval", table_run["ckpt"], f"+data.path={grown}", "new_data=true")
    metrics = evaluate(cfg)
    assert "evaluating all 300 rows of" in caplog.text
    assert "these are not the training run's test rows" in caplog.text
    answers = predict_rows(tmp_path / "predict", table_run["ckpt"], grown)
    predicted = np.array([row["class_name"] for row in answers])
    truth = np.array([row.rsplit(",", 1)[1] for row in table_rows(300)])
    assert metrics["test"]["test/acc"] == float((predicted == truth).mean())
    assert sum(row["support"] for row in metrics["per_class"].values()) == 300


def test_a_replaced_image_is_refused(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "images", classes=3, per_class=12, size=16)
    small = ["data.image_size=8", "data.num_workers=0", "model.net.channels=[4,8]"]
    overrides = [*QUICK, *EPOCH, "data=image_folder", f"data.root={root}", *small]
    metrics = train(compose_config(tmp_path / "run", overrides))
    checkpoint = module("checkpoints._restore").Checkpoint.open(metrics["best_checkpoint"])
    datamodule = checkpoint.datamodule()
    first_test = Path(datamodule.rows.inputs[int(datamodule.parts["test"][0])])
    other = next(path for path in sorted(root.rglob("*.png")) if path.parent != first_test.parent)
    shutil.copyfile(other, first_test)  # another image under the same name
    with pytest.raises(
        UserError, match=r"the test split is not .* rows, but their content differs"
    ):
        checkpoint.datamodule()


def test_a_teams_own_read_giving_other_rows_is_refused(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.npy")
    own = [
        "trusted_classes=[own_rows.NpyRows]", "data._target_=own_rows.NpyRows",
        f"+data.path={rows}", "model=mlp",
    ]  # fmt: skip
    metrics = train(compose_config(tmp_path / "run", [*QUICK, *EPOCH, *own]))
    write_rows(rows, seed=1)  # read() now gives other rows
    cfg = eval_config(tmp_path / "eval", metrics["best_checkpoint"], own[0])
    with pytest.raises(UserError, match=r"the test split is not .* 36 rows, but their content"):
        evaluate(cfg)


def test_a_resume_on_changed_data_is_refused_before_the_run_directory_changes(
    tmp_path: Path,
) -> None:
    table = write_table(tmp_path / "table.csv", table_rows(250))
    first = [*QUICK, *EPOCH, "data=csv", f"data.path={table}", "data.target=label"]
    run = tmp_path / "run"
    train(compose_config(run, first), overrides=first)
    write_table(table, table_rows(300))  # the file grew since
    last = run / "checkpoints" / "last.ckpt"
    again = [*QUICK, f"ckpt_path={last}", "trainer.max_epochs=2"]
    before = {path.name: path.stat().st_mtime_ns for path in (run / "checkpoints").iterdir()}
    with pytest.raises(UserError, match=r"the train split is not the one .* rows where it had"):
        train(compose_config(run, again), overrides=again)
    after = {path.name: path.stat().st_mtime_ns for path in (run / "checkpoints").iterdir()}
    assert after == before


def test_ones_own_run_on_outside_data_evaluates_from_another_directory(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    table = write_table(data / "table.csv", table_rows(120))
    first = run_cli(
        "train", *QUICK, *EPOCH, "data=csv", f"data.path={table}", "data.target=label",
        cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    [checkpoint] = (tmp_path / "outputs").rglob("last.ckpt")
    result = run_cli(
        "eval", f"ckpt_path={checkpoint}", "callbacks.progress_bar=null", cwd=elsewhere
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [path] = (elsewhere / "outputs" / "eval" / "runs").glob("*/metrics.json")
    assert read_json(path)["test"]["test/acc"] >= 0.0


def foreign(checkpoint: dict[str, Any], path: Path) -> Path:
    """``checkpoint`` saved as someone else would: intact (a checksum) but no seal of ours."""
    content = {k: v for k, v in checkpoint.items() if k not in (CHECKSUM_KEY, SEAL_KEY)}
    content.pop(module("checkpoints._integrity").SEALED, None)
    content[CHECKSUM_KEY] = content_checksum(content)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(content, path)
    return path


def test_a_foreign_checkpoint_naming_an_outside_path_reads_and_echoes_nothing(
    table_run: dict[str, Any], tmp_path: Path
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("TOPSECRET-FIRST-LINE,b\n1,2\n")
    checkpoint = torch.load(table_run["ckpt"], weights_only=True)
    checkpoint["data"]["args"]["path"] = str(secret)
    crafted = foreign(checkpoint, tmp_path / "crafted.ckpt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_cli("eval", f"ckpt_path={crafted}", cwd=elsewhere)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert "is not sealed by this project" in output
    assert "e.g. data.path=/path/to/it" in output
    assert "TOPSECRET" not in output
    assert str(secret) not in output
    # named on the command line, its own table evaluates
    named = run_cli(
        "eval", f"ckpt_path={crafted}", f"+data.path={table_run['table']}",
        "callbacks.progress_bar=null", cwd=elsewhere,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr[-3000:]


def test_a_foreign_checkpoint_resumes_with_the_command_lines_settings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = [*QUICK, "trainer.max_epochs=1"]
    metrics = train(compose_config(tmp_path / "a", first), overrides=first)
    checkpoint = torch.load(
        Path(metrics["run_dir"]) / "checkpoints" / "last.ckpt", weights_only=True
    )
    checkpoint["run_settings"]["trainer"]["max_epochs"] = 100_000  # a planted run length
    crafted = foreign(checkpoint, tmp_path / "b" / "checkpoints" / "last.ckpt")
    caplog.set_level(logging.INFO)
    again = [*QUICK[1:3], "callbacks.early_stopping=null", f"ckpt_path={crafted}"]
    resumed = train(compose_config(tmp_path / "b", again), overrides=again)
    assert "is not sealed by this project (seal.py): its run settings" in caplog.text
    assert resumed["epochs"] == 15  # today's config, not the file's


@pytest.mark.parametrize("name", ["digits", "csv", "diabetes", "sequences", "image_folder"])
def test_a_checkpoint_from_before_evaluates_saying_its_data_cannot_be_checked(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    named = {
        "csv": ["+data.path=null", f"+data.data_dir={tmp_path}"],
        "diabetes": ["+data.path=null", f"+data.data_dir={tmp_path}"],
        "image_folder": [
            f"+data.root={write_image_folder(tmp_path / 'i', classes=3, per_class=12, size=16)}"
        ],
    }.get(name, [])  # its data outside this project: named again, as platekit 0.2 needed
    caplog.set_level(logging.INFO)
    metrics = evaluate(eval_config(tmp_path / "eval", str(OLD / f"{name}.ckpt"), *named))
    assert "records no fingerprint of its data (platekit < 0.3)" in caplog.text
    assert np.isfinite(list(metrics["test"].values())).all()


def test_a_checkpoint_from_before_exports_predicts_and_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = OLD / "digits.ckpt"
    caplog.set_level(logging.INFO)
    cfg = compose_config(tmp_path / "export", [f"ckpt_path={old}", "repeats=1"], "export")
    module("export").export(cfg)
    [model] = (tmp_path / "export").rglob("model.onnx")
    (tmp_path / "split").mkdir()
    split = raw_test_split(tmp_path / "split")
    for backend in (old, model):
        rows = predict_rows(tmp_path / "predict", backend, split["path"])
        assert len(rows) == len(split["labels"]) == 269
    run = tmp_path / "resume" / "checkpoints"
    run.mkdir(parents=True)
    shutil.copyfile(old, run / "last.ckpt")
    again = [*QUICK, "model=mlp", "model.net.hidden=[8]", "trainer.max_epochs=2"]
    again.append(f"ckpt_path={run / 'last.ckpt'}")
    resumed = train(compose_config(tmp_path / "resume", again), overrides=again)
    assert resumed["epochs"] == 2
    assert "records no run settings (written before platekit 0.3)" in caplog.text
