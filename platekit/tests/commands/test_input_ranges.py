"""Inputs far outside the training range are flagged per row, not answered as if known.

The raw train split's range per feature (a table) or channel (an image) is in the checkpoint
and model.onnx; predict flags a row beyond it by more than a quarter of its width. The
training run's own test split is (almost) never flagged; the digits at their raw 0..16 scale,
or a table column a thousand times its scale, always are. A model that records no range
predicts as before, with one line saying inputs are not checked.
"""

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from platekit.testing import predict_rows, raw_test_split

from support import FIXTURES, QUICK, compose_config, module

OUTSIDE = "outside_training_range"
OLD = FIXTURES / "platekit-0.2" / "digits.ckpt"


def flagged(rows: list[dict[str, Any]]) -> float:
    return sum(bool(row[OUTSIDE]) for row in rows) / len(rows)


def test_digits_test_split_passes_and_raw_pixels_are_flagged(
    exported: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    split = raw_test_split(tmp_path)
    np.save(tmp_path / "raw16.npy", split["raw"] * 16)  # the data set's own 0..16 pixels
    for model in (exported["ckpt"], exported["model"]):
        assert flagged(predict_rows(tmp_path / "a", model, split["path"])) < 0.01
        with caplog.at_level(logging.WARNING):
            raw = predict_rows(tmp_path / "b", model, tmp_path / "raw16.npy")
        assert flagged(raw) == 1.0
        assert raw[0][OUTSIDE].startswith("channel 0=16 (trained 0..1)")
    assert "269 of 269 rows hold inputs outside the training range by more than 50% of it" in (
        caplog.text
    )


def test_a_table_column_at_a_thousand_times_its_scale_is_flagged(tmp_path: Path) -> None:
    run = [*QUICK, "data=csv", f"data.data_dir={tmp_path}"]  # the wine table, 13 columns
    metrics = module("train").train(compose_config(tmp_path / "run", run), run)
    checkpoint = module("checkpoints._restore").Checkpoint.open(metrics["best_checkpoint"])
    datamodule = checkpoint.datamodule()
    raw = datamodule.raw_inputs("test").numpy()
    np.save(tmp_path / "test.npy", raw)
    assert (
        flagged(predict_rows(tmp_path / "a", metrics["best_checkpoint"], tmp_path / "test.npy"))
        < 0.01
    )
    names = checkpoint.info.feature_names
    for column in (0, names.index("proline")):
        scaled = raw.copy()
        scaled[:, column] *= 1000
        np.save(tmp_path / "scaled.npy", scaled)
        rows = predict_rows(tmp_path / "b", metrics["best_checkpoint"], tmp_path / "scaled.npy")
        assert flagged(rows) == 1.0
        assert rows[0][OUTSIDE].startswith(f"{names[column]}=")


def test_a_model_without_a_recorded_range_predicts_saying_inputs_are_not_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    split = raw_test_split(tmp_path)
    with caplog.at_level(logging.INFO):
        rows = predict_rows(tmp_path / "p", OLD, split["path"])
    assert len(rows) == 269
    assert OUTSIDE not in rows[0]
    assert "inputs are not checked against a training range: the model records none" in caplog.text
