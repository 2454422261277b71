"""Image folders and a team's own modules: no silent merges, no late failures, no dead ends.

- A folder inside a class folder is refused at train (it silently joined the class), and
  predict reads a folder as training reads a class folder: its own files, saying what it
  left.
- Every file of every split decodes before training: all bad files in one line, or left out
  with ``data.skip_bad_files=true`` (a line each).
- A plain ``LightningDataModule`` declaring ``target_kind = "value"`` trains a regression,
  evaluates, exports and predicts.
- Two-column targets (plain module, CSV route) and a net returning a tuple are named as such.
"""

import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lightning import Callback

from platekit.testing import predict_rows, write_image_folder

from support import QUICK, compose_config, module, read_json, run_cli

UserError = module("_errors").UserError
train = module("train").train
SMALL = ["data.image_size=8", "data.num_workers=0", "model.net.channels=[4,8]"]
EPOCH = ["trainer.max_epochs=1", "callbacks.early_stopping=null"]


def images(root: Path) -> Path:
    return write_image_folder(root, classes=3, per_class=12, size=16)


def image_run(root: Path, *extra: str) -> list[str]:
    return [*QUICK, *EPOCH, "data=image_folder", f"data.root={root}", *SMALL, *extra]


def test_a_folder_inside_a_class_folder_is_refused_not_merged(tmp_path: Path) -> None:
    root = images(tmp_path / "images")
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    more = classes[0] / "more"
    more.mkdir()
    for path in sorted(classes[1].glob("*.png"))[:5]:
        shutil.copy(path, more / path.name)
    with pytest.raises(UserError, match=rf"{classes[0].name}/more/ \(5\).*make each a class"):
        train(compose_config(tmp_path / "run", image_run(root)))
    shutil.rmtree(more)
    metrics = train(compose_config(tmp_path / "run2", image_run(root)))
    assert sum(row["support"] for row in metrics["per_class"].values()) == int(36 * 0.15)


def test_predict_reads_a_folders_own_files_and_names_the_subfolders_it_left(
    exported: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = images(tmp_path / "scans")
    top = tmp_path / "top"
    top.mkdir()
    pngs = sorted(root.rglob("*.png"))
    for path in pngs[:3]:
        shutil.copy(path, top / path.name)
    (top / "deeper").mkdir()
    for path in pngs[3:7]:
        shutil.copy(path, top / "deeper" / path.name)
    with caplog.at_level(logging.WARNING):
        rows = predict_rows(tmp_path / "p", exported["model"], top)
    assert len(rows) == 3
    assert "its subfolders" in caplog.text
    assert "deeper are not read (a folder's inputs are its own files" in caplog.text
    both = predict_rows(tmp_path / "q", exported["model"], [top, top / "deeper"])
    assert len(both) == 7


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # its header stays valid: only decoding fails


def test_bad_files_of_every_split_are_named_at_once_before_training_or_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = images(tmp_path / "images")
    datamodule = module("data").ImageFolderDataModule(root=str(root), image_size=8)
    datamodule.setup()
    bad = [
        Path(datamodule.rows.inputs[int(datamodule.parts[split][0])])
        for split in ("train", "val", "test")
    ]
    for path in bad:
        truncate(path)
    with pytest.raises(UserError) as refused:
        train(compose_config(tmp_path / "run", image_run(root)))
    message = str(refused.value)
    assert message.startswith("3 file(s) of the data cannot be read: ")
    assert "\n" not in message
    for path, split in zip(bad, ("train", "val", "test"), strict=True):
        assert f"{path} ({split}: " in message
    assert message.endswith("or leave them out with data.skip_bad_files=true")
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before training
    with caplog.at_level(logging.WARNING):
        metrics = train(
            compose_config(tmp_path / "run2", image_run(root, "+data.skip_bad_files=true"))
        )
    left = [
        r.getMessage() for r in caplog.records if "data.skip_bad_files: left out" in r.getMessage()
    ]
    assert len(left) == 3
    assert sum(row["support"] for row in metrics["per_class"].values()) == 5 - 1


OWN = ("Windows", "LongPairs", "TupleNet")
TRUST = f"trusted_classes=[{','.join(f'plain_regression.{name}' for name in OWN)}]"
PLAIN = [
    TRUST, *QUICK, "data._target_=plain_regression.Windows", "~data.eval_batch_size",
    "~data.val_fraction", "~data.test_fraction", "~data.num_workers", "~data.normalize",
    "~data.seed", "model=mlp", "trainer.max_epochs=4",
]  # fmt: skip


@pytest.mark.slow
def test_a_plain_module_declaring_values_trains_evaluates_exports_and_predicts(
    tmp_path: Path,
) -> None:
    result = run_cli("train", *PLAIN, cwd=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    [path] = (tmp_path / "outputs" / "train" / "runs").glob("*/metrics.json")
    metrics = read_json(path)
    assert set(metrics["test"]) == {"test/loss", "test/mae", "test/rmse", "test/r2"}
    assert metrics["test"]["test/r2"] > 0.5
    checkpoint = metrics["best_checkpoint"]
    evaluated = run_cli(
        "eval", f"ckpt_path={checkpoint}", TRUST, "callbacks.progress_bar=null", cwd=tmp_path
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    exported = run_cli("export", f"ckpt_path={checkpoint}", TRUST, "repeats=1", cwd=tmp_path)
    assert exported.returncode == 0, (exported.stdout + exported.stderr)[-3000:]
    [model] = (tmp_path / "outputs" / "export" / "runs").glob("*/model.onnx")
    np.save(tmp_path / "rows.npy", np.sin(np.arange(8, dtype=np.float32) / 8)[None])
    [row] = predict_rows(tmp_path / "p", model, tmp_path / "rows.npy")
    assert np.isfinite(row["value"])


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ["+data.columns=2"],
            r"gives targets of shape \(2,\) per row; supported: one target per row",
        ),
        (["data._target_=plain_regression.LongPairs"], r"gives targets of shape \(2,\) per row"),
    ],
)
def test_two_column_targets_through_a_plain_module_are_named(
    tmp_path: Path, overrides: list[str], said: str
) -> None:
    with pytest.raises(UserError, match=said):
        train(compose_config(tmp_path / "run", [*PLAIN, *overrides]))


def test_two_target_columns_through_the_csv_route_are_named(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("x,a,b\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(60)))
    overrides = [*QUICK, "data=csv", f"data.path={table}", "data.target=[a,b]"]
    with pytest.raises(
        UserError, match=r"names 2 columns; one target column is supported \(multi-target is not\)"
    ):
        train(compose_config(tmp_path / "run", overrides))


def test_a_net_returning_a_tuple_is_named_as_such(tmp_path: Path) -> None:
    overrides = [
        *PLAIN,
        "model.net._target_=plain_regression.TupleNet",
        "~model.net.hidden",
        "~model.net.dropout",
    ]
    with pytest.raises(
        UserError, match=r"returns a tuple of 2 values, not one tensor of shape \(batch, 1\)"
    ):
        train(compose_config(tmp_path / "run", overrides))


class BreakValFile(Callback):
    """Truncates one validation image after the first training epoch (it decoded at setup)."""

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.current_epoch == 0 and trainer.is_global_zero:
            datamodule = trainer.datamodule
            truncate(Path(datamodule.rows.inputs[int(datamodule.parts["val"][0])]))


@pytest.mark.slow
def test_a_file_that_breaks_during_the_run_ends_it_in_one_line(tmp_path: Path) -> None:
    root = images(tmp_path / "images")
    overrides = image_run(root, "data.num_workers=2", "trainer.max_epochs=2")
    overrides += ["+callbacks.breaker._target_=test_own_modules.BreakValFile"]
    result = run_cli("train", *[o for o in overrides if o != "trainer.max_epochs=1"], cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    assert "cannot be read any more" in line
    assert "restore it and resume (ckpt_path=last)" in line
    assert "Traceback" not in output
