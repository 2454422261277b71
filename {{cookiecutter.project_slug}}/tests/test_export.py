"""ONNX export of this project's model: one self-contained file, raw inputs, PyTorch parity."""

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import torch
from platekit.models import TaskModule
from platekit.testing import project_module, read_json


def test_export_writes_one_self_contained_model_that_matches_pytorch(
    exported: dict[str, Any],
) -> None:
    # No external-data file beside the model: model.onnx is all a user needs.
    assert {p.name for p in exported["dir"].iterdir()} == {
        "model.onnx",
        "export.json",
        "config.yaml",
    }
    report = read_json(exported["dir"] / "export.json")
    assert report == exported["report"]
    assert [row["batch_size"] for row in report["parity"]] == [1, 7, 64]
    for row in report["parity"]:
        assert row["max_abs_diff"] < 1e-4
        assert row["classes_agree"] is True
        for backend in ("torch", "onnxruntime"):
            assert 0 < row[f"{backend}_ms_p50"] <= row[f"{backend}_ms_p95"]


def test_export_records_interface_opset_and_source(exported: dict[str, Any]) -> None:
    report = exported["report"]
    assert report["inputs"] == [
        {"name": "images", "shape": ["batch", 1, 8, 8], "dtype": "tensor(float)"}
    ]
    assert [(o["name"], o["shape"]) for o in report["outputs"]] == [
        ("logits", ["batch", 10]),
        ("probabilities", ["batch", 10]),
    ]
    assert report["opset"] == 18
    assert report["checkpoint"] == str(Path(exported["ckpt"]).resolve())
    assert report["model"] == str(exported["model"].resolve())
    card = torch.load(exported["ckpt"], weights_only=True)["data"]
    assert report["normalisation"] == {k: card[k].tolist() for k in ("mean", "std")}
    assert report["data"]["input_shape"] == [1, 8, 8]
    assert report["data"]["class_names"] == list("0123456789")


def test_onnx_takes_raw_inputs_and_predicts_like_the_trained_model(
    exported: dict[str, Any],
) -> None:
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup("test")
    test = datamodule.split_tensors("test")
    raw = datamodule.raw_inputs("test").numpy()
    assert raw.min() >= 0  # pixels / 16, not normalised
    assert raw.max() <= 1 + 1e-6

    session = onnxruntime.InferenceSession(str(exported["model"]))
    # 269 rows: a batch size the parity check did not use, so the batch axis is truly free.
    logits, probabilities = session.run(None, {"images": raw})
    assert logits.shape == probabilities.shape == (269, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)

    checkpoint = torch.load(exported["ckpt"], weights_only=True)
    model = TaskModule(**checkpoint["hyper_parameters"])
    model.load_state_dict(checkpoint["state_dict"])
    with torch.inference_mode():
        expected = model.eval()(test.inputs)  # the normalised inputs training used
    np.testing.assert_allclose(logits, expected.numpy(), atol=1e-4)
    assert (logits.argmax(1) == test.targets.numpy()).mean() > 0.8
