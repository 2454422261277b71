"""Trainer options: precision presets, accumulation, clipping, grad norm, compile, hooks."""

import csv
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning import LightningModule

from support import QUICK, compose_config, module, read_json

precision = module("config._precision")
run = module("training._trainer")
UserError = module("_errors").UserError
TaskModule = module("models").TaskModule
DIGITS_TASK = module("models").Classification(num_classes=10)

# One plain-SGD step of a dropout-free MLP in fp32: updates follow the gradient exactly.
ONE_SGD_STEP = [
    *QUICK,
    "model=mlp",
    "model.net.dropout=0",
    "optimizer=sgd",
    "optimizer.momentum=0",
    "optimizer.nesterov=false",
    "optimizer.weight_decay=0",
    "scheduler=none",
    "trainer.precision=32-true",
    "trainer.max_epochs=1",
    "+trainer.limit_val_batches=0",
    "callbacks.model_checkpoint=null",
    "callbacks.early_stopping=null",
    "+trainer.enable_checkpointing=false",
    "trainer.log_every_n_steps=1",
]


@pytest.mark.parametrize(
    ("device", "bf16", "chosen"),
    [
        ("cuda", True, "bf16-mixed"),
        ("cuda", False, "16-mixed"),
        ("cpu", True, "32-true"),
        ("cpu", False, "32-true"),
        ("mps", True, "32-true"),
    ],
)
def test_auto_precision_rule(device: str, bf16: bool, chosen: str) -> None:
    assert precision.auto_precision(device, bf16) == chosen


@pytest.mark.parametrize(
    ("requested", "resolved"),
    [("32-true", "32-true"), (32, "32-true"), ("bf16", "bf16-mixed"), ("bf16-mixed", "bf16-mixed")],
)
def test_named_precisions_pass_through(requested: Any, resolved: str) -> None:
    assert precision.resolve_precision(requested, "cpu") == resolved


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("16-true", r"trainer.precision=16-true on CPU runs about 30x slower"),
        ("16-mixed", r"trainer.precision=16-mixed on CPU would silently run as bf16-mixed"),
        ("half", r"trainer.precision=half is not a precision preset; use one of auto, "),
    ],
)
def test_bad_precision_is_refused_before_training(tmp_path: Path, value: str, message: str) -> None:
    cfg = compose_config(tmp_path, [*QUICK, f"trainer.precision={value}"])
    with pytest.raises(UserError, match=message):
        run.build_trainer(cfg, task=DIGITS_TASK)


def test_run_records_the_precision_auto_chose(trained: dict[str, Any]) -> None:
    expected = "32-true"  # auto on any CPU (config/_precision.py)
    assert trained["cfg"].trainer.precision == "auto"
    assert trained["metrics"]["precision"] == expected
    assert read_json(trained["run_dir"] / "metrics.json")["precision"] == expected


def logged_grad_norms(run_dir: Path) -> dict[int, float]:
    """``train/grad_norm`` by step, as the csv logger wrote it."""
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        rows = csv.DictReader(handle)
        return {int(r["step"]): float(r["train/grad_norm"]) for r in rows if r["train/grad_norm"]}


def test_gradient_norm_is_logged(trained: dict[str, Any]) -> None:
    norms = logged_grad_norms(trained["run_dir"])
    assert list(norms) == [9, 19, 29, 39, 49, 59]  # 60 steps, logged every 10 (0-based)
    assert all(math.isfinite(n) and n > 0 for n in norms.values())


def fit(tmp_path: Path, *overrides: str) -> tuple[LightningModule, dict[str, torch.Tensor]]:
    """Fit with the overrides; return the model and a copy of its initial parameters."""
    cfg = compose_config(tmp_path, [*ONE_SGD_STEP, *overrides])
    run.prepare_run(cfg)
    datamodule, model, _ = run.build_parts(cfg)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer = run.build_trainer(cfg, task=model.task)
    trainer.fit(model, datamodule=datamodule)
    model.fitted_steps = trainer.global_step
    return model, initial


def test_two_accumulated_half_batches_step_like_one_full_batch(tmp_path: Path) -> None:
    # The sampler's order does not depend on the batch size: batches 0 and 1 of 32 rows
    # are batch 0 of 64 rows.
    accumulated, _ = fit(
        tmp_path / "a", "data.batch_size=32", "trainer.accumulate_grad_batches=2",
        "+trainer.limit_train_batches=2",
    )  # fmt: skip
    full, _ = fit(tmp_path / "b", "data.batch_size=64", "+trainer.limit_train_batches=1")
    assert accumulated.fitted_steps == full.fitted_steps == 1
    for (name, a), b in zip(accumulated.named_parameters(), full.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_clipping_bounds_the_gradient_norm_of_a_step(tmp_path: Path) -> None:
    clip = 0.01
    model, initial = fit(
        tmp_path, "optimizer.lr=1.0", f"trainer.gradient_clip_val={clip}",
        "+trainer.limit_train_batches=1",
    )  # fmt: skip
    step = [p.detach() - initial[name] for name, p in model.named_parameters()]
    # With SGD at lr 1 the step is the clipped gradient itself.
    assert torch.linalg.vector_norm(torch.stack([s.norm() for s in step])) == pytest.approx(
        clip, rel=1e-3
    )
    assert logged_grad_norms(tmp_path)[0] > 10 * clip  # logged before clipping


@pytest.mark.slow
def test_compile_trains_and_its_checkpoint_loads_uncompiled(tmp_path: Path) -> None:
    train = module("train")
    cfg = compose_config(
        tmp_path, [*QUICK, "compile=true", "trainer.max_epochs=1", "trainer.precision=32-true"]
    )
    metrics = train.train(cfg)
    assert metrics["test"]["test/acc"] > 0.3  # one epoch: well above chance (0.1)
    checkpoint = module("checkpoints._io").load_checkpoint(metrics["best_checkpoint"])
    assert not any("_orig_mod" in key for key in checkpoint["state_dict"])
    assert "compile" not in checkpoint["hyper_parameters"]  # how it ran, not what it is
    model = TaskModule(**checkpoint["hyper_parameters"])  # not compiled
    model.load_state_dict(checkpoint["state_dict"])  # strict: every key matches
    # eval rebuilds the model from the checkpoint alone, uncompiled, and scores the same.
    overrides = [
        f"ckpt_path={metrics['best_checkpoint']}",
        "trainer.accelerator=cpu",
        "trainer.precision=32-true",
    ]
    evaluated = module("eval").evaluate(compose_config(tmp_path / "eval", overrides, "eval"))
    assert evaluated["test"]["test/acc"] == pytest.approx(metrics["test"]["test/acc"], abs=1e-6)


def test_negative_step_checkpoint_interval_is_refused(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*QUICK, "callbacks.model_checkpoint.last_every_n_steps=-1"])
    with pytest.raises(UserError, match=r"last_every_n_steps=-1 must be >= 0 \(0 writes"):
        run.build_trainer(cfg, task=DIGITS_TASK)
