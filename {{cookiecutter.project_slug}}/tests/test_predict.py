"""Predict with this project's checkpoint and its ONNX export: they agree on the test split,
images predict like the arrays they show, and the command line rejects a wrong shape."""

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from platekit.testing import (
    predict_rows,
    raw_test_split,
    read_json,
    run_cli,
)


@pytest.fixture(scope="module")
def test_split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The test split as a raw .npy file (what a user would feed), with its labels."""
    return raw_test_split(tmp_path_factory.mktemp("inputs"))


run_predict = predict_rows


def test_checkpoint_and_onnx_predict_the_same_on_the_test_split(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    from_ckpt = run_predict(tmp_path, exported["ckpt"], test_split["path"])
    json_path = tmp_path / "onnx.json"
    from_onnx = run_predict(
        tmp_path, exported["model"], test_split["path"], f"output_path={json_path}"
    )
    assert len(from_ckpt) == len(from_onnx) == 269
    assert [r["class"] for r in from_ckpt] == [r["class"] for r in from_onnx]
    np.testing.assert_allclose(
        [r["probability"] for r in from_ckpt], [r["probability"] for r in from_onnx], atol=1e-4
    )
    assert np.mean([r["class"] for r in from_onnx] == test_split["labels"]) > 0.8

    # Both files hold the same rows: CSV by default, JSON when the path says so.
    with (tmp_path / "predictions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0] == {
        "input": f"{test_split['path']}[0]",
        "class": str(from_ckpt[0]["class"]),
        "class_name": str(from_ckpt[0]["class"]),  # digits' class names are the digits
        "probability": str(from_ckpt[0]["probability"]),
        "outside_training_range": "",  # within the train split's pixel range
    }
    assert read_json(json_path) == from_onnx  # strict JSON


def test_images_predict_like_the_arrays_they_show(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    paths = []
    for index, digit in enumerate(test_split["raw"][:4, 0]):  # (8, 8) in [0, 1], ink bright
        path = tmp_path / f"digit_{index}.png"
        # As a user's 32x32 scan would be: bigger, dark ink on white paper.
        image = Image.fromarray(np.round((1 - digit) * 255).astype(np.uint8))
        image.resize((32, 32), Image.Resampling.NEAREST).save(path)
        paths.append(path)
    from_arrays = run_predict(tmp_path, exported["model"], test_split["path"])[:4]
    from_images = run_predict(tmp_path, exported["model"], paths, "invert=true")
    assert [r["input"] for r in from_images] == [str(p) for p in paths]
    assert [r["class"] for r in from_images] == [r["class"] for r in from_arrays]


@pytest.mark.slow
def test_cli_predicts_and_rejects_a_wrong_shape(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "predictions.json"
    model = f"model_path={exported['model']}"
    result = run_cli(
        "predict", model, f"inputs={test_split['path']}", f"output_path={out}", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(json.loads(out.read_text())) == 269
    assert f"269 predictions: {out}" in result.stdout

    bad = tmp_path / "flat.npy"
    np.save(bad, test_split["raw"].reshape(-1, 64))
    result = run_cli("predict", model, f"inputs={bad}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: input '{bad}' has shape (269, 64); expected (N, 1, 8, 8)" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
