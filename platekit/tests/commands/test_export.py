"""ONNX export: one self-contained file, raw inputs, parity with PyTorch, clean failures."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from support import compose_config, module, read_json, run_cli

export = module("export")
UserError = module("_errors").UserError


def broken_checkpoint(path: Path, trained_ckpt: str, kind: str) -> Path:
    """Write a bad checkpoint of the given ``kind`` to ``path``."""
    if kind == "missing":
        return path / "nowhere.ckpt"
    target = path / f"{kind}.ckpt"
    if kind == "truncated":
        target.write_bytes(Path(trained_ckpt).read_bytes()[:1000])
        return target
    checkpoint = torch.load(trained_ckpt, weights_only=True)
    if kind == "other_architecture":
        checkpoint["hyper_parameters"]["net"]["channels"] = [16, 32]
    if kind == "foreign":
        checkpoint["hyper_parameters"] = {"width": 3}
    if kind == "undescribed":
        del checkpoint["data"]
    module("checkpoints._io").save_checkpoint(checkpoint, target)  # edited, re-sealed
    return target


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", r"checkpoint '.*nowhere.ckpt' does not exist"),
        ("truncated", r"is not a readable PyTorch checkpoint"),
        ("other_architecture", r"does not fit this model's architecture \(.*net\."),
        (
            "foreign",
            r"cannot rebuild its model .*TaskModule \(.*unexpected keyword argument 'width'",
        ),
        ("undescribed", r"does not describe its data and model"),
    ],
)
def test_bad_checkpoint_is_one_clear_error_and_writes_no_model(
    trained: dict[str, Any], tmp_path: Path, kind: str, message: str
) -> None:
    path = broken_checkpoint(tmp_path, trained["metrics"]["best_checkpoint"], kind)
    out_dir = tmp_path / "out"
    cfg = compose_config(out_dir, [f"ckpt_path={path}"], config_name="export")
    with pytest.raises(UserError, match=message):
        export.export(cfg)
    assert not list(tmp_path.rglob("*.onnx*"))


def test_settings_that_cannot_check_parity_are_rejected(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        ["ckpt_path=x.ckpt", "tolerance=0", "batch_sizes=[0,7]", "repeats=0"],
        config_name="export",
    )
    with pytest.raises(
        UserError, match=r"tolerance=0 must be > 0 .*; batch_sizes=\[0, 7\] .*; repeats=0"
    ):
        export.export(cfg)


def test_nan_outputs_fail_the_parity_check() -> None:
    # A NaN model: both sides output NaN, argmax agrees, and `nan >= tolerance` is False.
    row = {
        "batch_size": 1,
        "max_abs_diff": float("nan"),
        "classes_agree": True,
        **dict.fromkeys(["torch_ms_p50", "torch_ms_p95"], 0.1),
        **dict.fromkeys(["onnxruntime_ms_p50", "onnxruntime_ms_p95"], 0.1),
    }
    with pytest.raises(UserError, match=r"parity failed at batch size 1: max abs diff nan"):
        export.check_parity([row], 1e-4)
    export.check_parity([{**row, "max_abs_diff": 1e-6}], 1e-4)  # within tolerance: passes


@pytest.mark.slow
def test_failed_parity_exits_nonzero_and_leaves_no_model(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    # float32 kernels differ in the last bits, so a tolerance of 1e-12 cannot be met.
    best = trained["metrics"]["best_checkpoint"]
    strict = ["tolerance=1e-12", "rtol=0", "repeats=1", "verbose=true"]
    result = run_cli("export", f"ckpt_path={best}", *strict, cwd=tmp_path)
    assert result.returncode == 1
    assert "[torch.onnx] Obtain model graph" in result.stdout  # verbose=true: the exporter's steps
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert "ONNX parity failed at batch size 1" in errors[0]
    assert "no model.onnx was written" in errors[0]
    assert "max abs diff" in result.stdout  # the table is shown before the verdict
    assert not list(tmp_path.rglob("*.onnx*"))
    assert not list(tmp_path.rglob("export.json"))


@pytest.mark.slow
def test_cli_exports_and_prints_the_table(trained: dict[str, Any], tmp_path: Path) -> None:
    best = trained["metrics"]["best_checkpoint"]
    result = run_cli("export", f"ckpt_path={best}", "repeats=5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [run_dir] = (tmp_path / "outputs" / "export" / "runs").iterdir()
    assert {"model.onnx", "export.json", "export.log"} <= {p.name for p in run_dir.iterdir()}
    assert [row["batch_size"] for row in read_json(run_dir / "export.json")["parity"]] == [1, 7, 64]
    assert "batch  max abs diff  classes  torch p50" in result.stdout
    assert f"model:         {run_dir.resolve() / 'model.onnx'}" in result.stdout
    assert "[torch.onnx]" not in result.stdout + result.stderr  # the exporter's steps: verbose=true


def test_large_outputs_pass_parity_by_their_relative_difference() -> None:
    # A regression in dollars: float32 steps near 2e5 are 0.0156, so kernels differ by
    # 0.0625 there, far over an absolute 1e-4 yet 3e-7 of the value.
    expected = (np.array([[2.0e5], [1.5e5]], dtype=np.float32),)
    close = (expected[0] + np.float32(0.0625),)
    assert export.within_tolerance(expected, close, 1e-4, 1e-5)
    assert not export.within_tolerance(expected, close, 1e-4, 0.0)  # absolute alone fails
    wrong = (expected[0] * np.float32(1.001),)  # 0.1 % off: a real difference
    assert not export.within_tolerance(expected, wrong, 1e-4, 1e-5)
    # Small outputs (probabilities) are still held to the absolute tolerance.
    small = (np.array([[0.2, 0.8]], dtype=np.float32),)
    assert not export.within_tolerance(small, (small[0] + np.float32(3e-4),), 1e-4, 1e-5)
    nan = (np.array([[np.nan]], dtype=np.float32),)
    assert not export.within_tolerance(nan, nan, 1e-4, 1e-5)
    row = {
        "batch_size": 7,
        "max_abs_diff": 0.0625,
        "max_rel_diff": 3.1e-7,
        "within_tolerance": False,
        "classes_agree": True,
    }
    with pytest.raises(UserError, match=r"max abs diff 0.0625, max rel diff 3.1e-07 \(tolerance"):
        export.check_parity([row], 1e-4, 1e-5)
    export.check_parity([{**row, "within_tolerance": True}], 1e-4, 1e-5)
