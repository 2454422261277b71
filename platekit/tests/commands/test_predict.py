"""Predict: checkpoint and ONNX agree on the test split; arrays, images, clear input errors."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from platekit.testing import predict_rows, raw_test_split

from support import CONFIG_DIR, PACKAGE, ROOT, module

predict = module("predict")
UserError = module("_errors").UserError


@pytest.fixture(scope="module")
def test_split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The test split as a raw .npy file (what a user would feed), with its labels."""
    return raw_test_split(tmp_path_factory.mktemp("inputs"))


run_predict = predict_rows


def image_forms(digit: np.ndarray, directory: Path) -> dict[str, Path]:
    """One digit (8, 8) in [0, 1], ink bright, saved as the kinds of PNG users have."""
    directory.mkdir(parents=True, exist_ok=True)
    eight = np.round(digit * 255).astype(np.uint8)
    forms = {
        "8-bit": Image.fromarray(eight),
        "16-bit": Image.fromarray(np.round(digit * 65535).astype(np.uint16)),
        "rgb": Image.fromarray(np.stack([eight] * 3, axis=2)),
        "palette": Image.fromarray(np.stack([eight] * 3, axis=2)).convert("P"),
        "alpha": Image.fromarray(np.stack([eight, np.full_like(eight, 255)], axis=2), "LA"),
    }
    paths = {}
    for name, image in forms.items():
        paths[name] = directory / f"{name}.png"
        image.save(paths[name])
    return paths


def test_every_png_kind_predicts_like_its_8_bit_version(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    for index in range(3):
        paths = image_forms(test_split["raw"][index, 0], tmp_path / f"digit{index}")
        rows = run_predict(tmp_path / "out", exported["model"], list(paths.values()))
        classes = {name: row["class"] for name, row in zip(paths, rows, strict=True)}
        assert len(set(classes.values())) == 1, classes  # 16-bit, palette, RGB, alpha alike
        probabilities = [row["probability"] for row in rows]
        np.testing.assert_allclose(probabilities, probabilities[0], atol=0.02)


def test_a_folder_of_images_is_its_own_files_as_a_class_folder_is(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    """Training reads a class folder's own files: predict reads a folder the same way."""
    image_forms(test_split["raw"][0, 0], tmp_path / "scans" / "a")
    image_forms(test_split["raw"][1, 0], tmp_path / "scans" / "b" / "deeper")
    with pytest.raises(UserError, match=r"holds no .* files of its own \(its subfolders do"):
        run_predict(tmp_path / "out", exported["model"], tmp_path / "scans")
    folders = [tmp_path / "scans" / "a", tmp_path / "scans" / "b" / "deeper"]
    rows = run_predict(tmp_path / "out", exported["model"], folders)
    assert len(rows) == 10
    assert all(row["input"].endswith(".png") for row in rows)


def test_inverted_images_are_warned_about(
    exported: dict[str, Any],
    test_split: dict[str, Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    dark_on_light = tmp_path / "paper.png"
    Image.fromarray(np.round((1 - test_split["raw"][0, 0]) * 255).astype(np.uint8)).save(
        dark_on_light
    )
    with caplog.at_level(logging.WARNING):
        run_predict(tmp_path / "a", exported["model"], dark_on_light)
    assert "1 of 1 images have a background unlike the training data's (dark" in caplog.text
    assert "pass invert=true" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run_predict(tmp_path / "b", exported["model"], dark_on_light, "invert=true")
    assert "background unlike" not in caplog.text


def test_npz_with_several_arrays_needs_a_key(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "bundle.npz"
    np.savez(path, images=test_split["raw"][:5], labels=test_split["labels"][:5])
    with pytest.raises(UserError, match=r"holds arrays \['images', 'labels'\].*set npz_key"):
        run_predict(tmp_path, exported["model"], path)
    rows = run_predict(tmp_path, exported["model"], path, "npz_key=images")
    assert [r["input"] for r in rows] == [f"{path}[{i}]" for i in range(5)]


@pytest.mark.parametrize(
    ("backend", "array", "message"),
    [
        (
            "ckpt",
            np.zeros((3, 8, 8), np.float32),
            r"has shape \(3, 8, 8\); expected \(N, 1, 8, 8\)",
        ),
        (
            "model",
            np.zeros((3, 8, 8), np.float32),
            r"has shape \(3, 8, 8\); expected \(N, 1, 8, 8\)",
        ),
        ("model", np.zeros((3, 64), np.float32), r"has shape \(3, 64\); expected \(N, 1, 8, 8\)"),
        (
            "model",
            np.zeros((3, 1, 8, 8), np.int64),
            r"has dtype int64; expected floats of shape \(N, 1, 8, 8\)",
        ),
        ("model", np.full((3, 1, 8, 8), np.nan, np.float32), r"row 0 holds NaN, Inf"),
    ],
    ids=["no-channel-ckpt", "no-channel-onnx", "flat", "integers", "nan"],
)
def test_wrong_inputs_name_the_expected_shape(
    exported: dict[str, Any], tmp_path: Path, backend: str, array: np.ndarray, message: str
) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(UserError, match=message):
        run_predict(tmp_path, exported[backend], path)
    assert not (tmp_path / "predictions.csv").exists()


@pytest.mark.parametrize("shape", [(0,), (0, 1, 8, 8)])
def test_an_empty_array_is_one_clear_error(
    exported: dict[str, Any], tmp_path: Path, shape: tuple[int, ...]
) -> None:
    path = tmp_path / "empty.npy"
    np.save(path, np.zeros(shape, np.float32))
    expected = rf"input '{path}' is empty \(shape {re.escape(str(shape))}\); pass an array"
    with pytest.raises(UserError, match=expected):
        run_predict(tmp_path, exported["model"], path)


def test_an_npz_without_arrays_is_one_clear_error(exported: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "nothing.npz"
    np.savez(path)
    with pytest.raises(UserError, match=rf"input '{path}' is an .npz holding no arrays; save"):
        run_predict(tmp_path, exported["model"], path)


@pytest.mark.parametrize(
    ("model_path", "inputs", "message"),
    [
        ("model.onnx", "test.npy", r"model 'model.onnx' does not exist"),
        ("{model}", "nowhere.npy", r"input 'nowhere.npy' is not an existing file or folder"),
        ("{garbage_onnx}", "test.npy", r"'.*garbage.onnx' is not a loadable ONNX model"),
        ("{model}", "{bad_suffix}", r"has suffix '.txt'; use one of .npy, .npz, .csv, .png"),
        ("{bad_suffix}", "test.npy", r"checkpoint '.*notes.txt' (is not|holds)"),
    ],
)
def test_bad_paths_are_clear_errors(
    exported: dict[str, Any], tmp_path: Path, model_path: str, inputs: str, message: str
) -> None:
    bad_suffix = tmp_path / "notes.txt"
    bad_suffix.write_text("not data")
    garbage_onnx = tmp_path / "garbage.onnx"
    garbage_onnx.write_bytes(b"\x00not a protobuf")
    names = {"model": exported["model"], "bad_suffix": bad_suffix, "garbage_onnx": garbage_onnx}
    with pytest.raises(UserError, match=message):
        run_predict(tmp_path, model_path.format(**names), inputs.format(**names))


def test_onnx_predict_imports_neither_torch_nor_lightning(
    exported: dict[str, Any], test_split: dict[str, Any], tmp_path: Path
) -> None:
    # A fresh interpreter runs the command as `python -m <package>.predict` would.
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['predict', 'model_path={exported['model']}', "
        f"'inputs={test_split['path']}', 'paths.root_dir={tmp_path}']\n"
        "try:\n"
        f"    runpy.run_module('{PACKAGE}.predict', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    assert stop.code in (0, None), stop.code\n"
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "CONFIG_DIR": str(CONFIG_DIR)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "269 predictions" in result.stdout
