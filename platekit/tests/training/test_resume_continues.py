"""A resume continues the run it interrupts: the checkpoint's settings, not today's config.

Each case sets one setting to a non-default value in the first run, crashes it, and resumes
with nothing but ``ckpt_path``: the resumed run must end bitwise equal to an uninterrupted
run with that value, and its ``config.yaml`` must record the value it used. A value the
command line names on the resume is used, and said.
"""

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from platekit.checkpoints._run_record import PLACEMENT
from platekit.testing import CrashError, crash_after, final_state

from support import CONFIG_DIR, compose_config, module, read_json, run_cli

train = module("train").train

BASE = ["callbacks.progress_bar=null", "trainer.accelerator=cpu", "logger=csv"]
FIRST = ["trainer.max_epochs=3", "callbacks.early_stopping=null"]  # given to the first legs

# One case per key of configs/trainer/default.yaml (but where the run runs), plus the
# schedule and a steering callback: (the first run's overrides, the config.yaml key, value).
CASES = {
    "precision": (["trainer.precision=bf16-mixed"], "trainer.precision", "bf16-mixed"),
    "max_epochs": (["trainer.max_epochs=2"], "trainer.max_epochs", 2),
    "accumulate_grad_batches": (
        ["trainer.accumulate_grad_batches=2"], "trainer.accumulate_grad_batches", 2,
    ),
    "gradient_clip_val": (["trainer.gradient_clip_val=0.05"], "trainer.gradient_clip_val", 0.05),
    "gradient_clip_algorithm": (
        ["trainer.gradient_clip_val=0.01", "trainer.gradient_clip_algorithm=value"],
        "trainer.gradient_clip_algorithm", "value",
    ),
    "check_val_every_n_epoch": (
        ["trainer.check_val_every_n_epoch=2"], "trainer.check_val_every_n_epoch", 2,
    ),
    "log_every_n_steps": (["trainer.log_every_n_steps=3"], "trainer.log_every_n_steps", 3),
    "deterministic": (["trainer.deterministic=false"], "trainer.deterministic", False),
    "enable_model_summary": (
        ["trainer.enable_model_summary=true"], "trainer.enable_model_summary", True,
    ),
    "scheduler": (["scheduler=step"], "scheduler._target_", "platekit.models.StepDecay"),
    "checkpoint_mode": (
        ["callbacks.model_checkpoint.mode=min"], "callbacks.model_checkpoint.mode", "min",
    ),
}  # fmt: skip


def test_every_trainer_setting_is_kept_or_placement() -> None:
    """A new key in the trainer config is a decision: kept by a resume (a case here) or not."""
    keys = set(yaml.safe_load((CONFIG_DIR / "trainer" / "default.yaml").read_text())) - {"_target_"}
    tested = {case[1].removeprefix("trainer.") for case in CASES.values()}
    assert keys - PLACEMENT == tested & keys


def leg(run_dir: Path, given: list[str]) -> dict[str, Any]:
    overrides = [*BASE, *given]
    return train(compose_config(run_dir, overrides), overrides=overrides)


def value_at(config: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        config = config[part]
    return config


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_resume_keeps_the_checkpoints_setting(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides, key, value = CASES[case]
    length = [] if case == "max_epochs" else FIRST[:1]
    first = [*length, *FIRST[1:], *overrides, "callbacks.model_checkpoint.last_every_n_steps=5"]
    leg(tmp_path / "reference", first)
    with pytest.raises(CrashError):
        leg(tmp_path / "run", [*first, *crash_after(25)])
    caplog.set_level(logging.INFO)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    leg(tmp_path / "run", [f"ckpt_path={last}"])
    expected, actual = final_state(tmp_path / "reference"), final_state(tmp_path / "run")
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert torch.equal(actual[name], tensor), name
    used = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert value_at(used, key) == value
    if case in ("max_epochs", "precision", "scheduler"):
        assert "from the checkpoint" in caplog.text  # differs from today's default: said


def test_a_setting_named_on_the_resume_is_used_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leg(tmp_path, ["trainer.max_epochs=1", "callbacks.early_stopping=null"])
    caplog.set_level(logging.INFO)
    last = tmp_path / "checkpoints" / "last.ckpt"
    metrics = leg(tmp_path, [f"ckpt_path={last}", "trainer.max_epochs=2"])
    assert metrics["epochs"] == 2
    assert "trainer.max_epochs=2 given: the resumed run changes it from the checkpoint's 1" in (
        caplog.text
    )


def test_precision_is_recorded_and_a_change_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leg(tmp_path, ["trainer.max_epochs=1", "trainer.precision=bf16-mixed"])
    last = tmp_path / "checkpoints" / "last.ckpt"
    record = torch.load(last, weights_only=True)["run_settings"]
    assert record["precision"] == "bf16-mixed"
    assert record["trainer"]["max_epochs"] == 1
    caplog.set_level(logging.INFO)
    leg(tmp_path, [f"ckpt_path={last}", "trainer.max_epochs=2", "trainer.precision=32-true"])
    assert (
        "precision 32-true, but the resumed run trained at bf16-mixed: the run continues, no "
        "longer bitwise equal to an uninterrupted one"
    ) in caplog.text
    assert read_json(tmp_path / "metrics.json")["precision"] == "32-true"


def test_text_in_a_checkpoints_record_never_becomes_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose text holds an interpolation is not used: it stays out of the config."""
    leg(tmp_path / "a", ["trainer.max_epochs=1"])
    last = tmp_path / "a" / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t")
    checkpoint["run_settings"]["trainer"]["gradient_clip_algorithm"] = "\\${oc.env:SECRET_TOKEN}"
    checkpoint["run_settings"]["callbacks"]["early_stopping"]["mode"] = "${oc.env:SECRET_TOKEN}"
    crafted = tmp_path / "crafted.ckpt"
    torch.save(checkpoint, crafted)
    settings = module("checkpoints._run_record")
    cfg = compose_config(tmp_path / "b", [*BASE, f"ckpt_path={crafted}"])
    caplog.set_level(logging.INFO)
    checkpoint[module("checkpoints._integrity").SEALED] = True  # no rule is relaxed for ours
    settings.keep_recorded_settings(cfg, checkpoint, set(), str(crafted))
    assert "trainer.gradient_clip_algorithm, callbacks.early_stopping.mode not plain" in (
        caplog.text
    )
    assert cfg.trainer.gradient_clip_algorithm == "norm"
    assert cfg.callbacks.early_stopping.mode is None
    assert "s3cr3t" not in caplog.text


def test_a_resume_of_a_three_epoch_run_stays_three_epochs(tmp_path: Path) -> None:
    """Through the command line: ``ckpt_path=last`` alone (the config says 15 epochs)."""
    first = run_cli("train", *BASE, "trainer.max_epochs=3", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    again = run_cli("train", *BASE, "ckpt_path=last", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "trainer.max_epochs=3 from the checkpoint (config: 15)" in again.stdout + again.stderr
    [path] = (tmp_path / "outputs" / "train" / "runs").glob("*/metrics.json")
    assert read_json(path)["epochs"] == 3


def test_a_copied_run_directory_tests_its_own_best(tmp_path: Path) -> None:
    """Lightning forgets the best score when the checkpoint folder moved: the next epoch was
    "best" and tested while the summary named another. The copy keeps its best."""
    worst_first = [  # val/acc rises: epoch 0 is "best", later epochs lose
        "callbacks.model_checkpoint.monitor=val/acc",
        "callbacks.model_checkpoint.mode=min",
        "callbacks.early_stopping=null",
    ]
    original = tmp_path / "original"
    leg(original, ["trainer.max_epochs=2", *worst_first])
    assert read_json(original / "metrics.json")["best_checkpoint"].endswith("epoch_000.ckpt")
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    shutil.rmtree(original)
    last = copy / "checkpoints" / "last.ckpt"
    metrics = leg(copy, [f"ckpt_path={last}", "trainer.max_epochs=4"])
    assert metrics["best_checkpoint"] == str(copy / "checkpoints" / "epoch_000.ckpt")
    assert metrics["best"]["epoch"] == 0  # the summary's "best" column is the tested epoch
