"""Exact resume: an interrupted and resumed run ends bitwise equal to an uninterrupted one.

Compared: every tensor of the final state dict and the loss of every training step, with
shuffling, dropout and num_workers 0 and 2, interrupted at an epoch boundary and mid-epoch.
"""

import csv
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from platekit.testing import CrashError, final_state

from support import FIXTURES, QUICK, compose_config, loss_logging, module, step_losses

train = module("train")

STEPS_PER_EPOCH = 20  # 1258 train rows in batches of 64
EPOCHS = 3
# Every leg has the same max_epochs, so the same lr plan (a shorter first leg would plan a
# shorter schedule: see test_schedules.py for extending a run).
BASE = [
    *QUICK,
    f"trainer.max_epochs={EPOCHS}",
    "callbacks.early_stopping=null",
    "callbacks.model_checkpoint.last_every_n_steps=10",
]


def run(run_dir: Path, *overrides: str) -> None:
    """Train as the command line ``train BASE... overrides...`` would (each one given)."""
    given = [*BASE, *loss_logging(run_dir / "losses.txt"), *overrides]
    train.train(compose_config(run_dir, given), overrides=given)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One uninterrupted run per num_workers value, built on first use."""

    class Runs(dict):
        def __missing__(self, workers: int) -> Path:
            run_dir = tmp_path_factory.mktemp(f"uninterrupted_{workers}")
            run(run_dir, f"data.num_workers={workers}")
            self[workers] = run_dir
            return run_dir

    return Runs()


def assert_same_run(resumed: Path, reference: Path) -> None:
    expected, actual = final_state(reference), final_state(resumed)
    assert expected.keys() == actual.keys()
    for key, tensor in expected.items():
        assert torch.equal(actual[key], tensor), key
    losses, resumed_losses = (
        step_losses(reference / "losses.txt"),
        step_losses(resumed / "losses.txt"),
    )
    assert len(losses) == STEPS_PER_EPOCH * EPOCHS
    assert resumed_losses == losses


@pytest.mark.parametrize(
    "overrides",
    [
        # val/acc rises after epoch 0, so in mode=min no epoch after it makes a new best
        pytest.param(
            [
                "callbacks.model_checkpoint.mode=min",
                "callbacks.model_checkpoint.last_every_n_steps=0",
            ],
            id="no-new-best",
        ),
        # the same, and a step write at each epoch's last step, before its validation ran
        pytest.param(
            [
                "callbacks.model_checkpoint.mode=min",
                "callbacks.model_checkpoint.last_every_n_steps=20",
            ],
            id="step-write-before-validation",
            marks=pytest.mark.slow,
        ),
        # validation every other epoch: Lightning saves in on_validation_end, before the
        # epoch's end is complete
        pytest.param(
            [
                "trainer.check_val_every_n_epoch=2",
                "callbacks.model_checkpoint.last_every_n_steps=0",
            ],
            id="validation-every-2-epochs",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_last_checkpoint_holds_every_finished_epoch(tmp_path: Path, overrides: list[str]) -> None:
    crash = ["+callbacks.crash._target_=platekit.testing.CrashAfter", "+callbacks.crash.step=45"]
    with pytest.raises(CrashError):
        run(tmp_path, *overrides, *crash)
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 40  # the end of epoch 1, after its validation
    assert [row["epoch"] for row in checkpoint["callbacks"]["MetricHistory"]["epochs"]] == [0, 1]


@pytest.mark.slow
def test_resume_with_gradient_accumulation_is_exact(tmp_path: Path) -> None:
    """Step writes come only after a batch that completes an optimizer step, resumed or not."""
    accumulate = [
        "trainer.accumulate_grad_batches=2",
        "callbacks.model_checkpoint.last_every_n_steps=5",
    ]
    run(tmp_path / "reference", *accumulate)
    resumed = tmp_path / "resumed"
    for crash_step in (7, 6):  # the second leg resumes from step 5 and crashes again
        with pytest.raises(CrashError):
            run(
                resumed,
                *accumulate,
                "+callbacks.crash._target_=platekit.testing.CrashAfter",
                f"+callbacks.crash.step={crash_step}",
                *([f"ckpt_path={resumed}/checkpoints/last.ckpt"] if crash_step == 6 else []),
            )
    run(resumed, *accumulate, f"ckpt_path={resumed}/checkpoints/last.ckpt")
    expected, actual = final_state(tmp_path / "reference"), final_state(resumed)
    assert expected.keys() == actual.keys()
    for key, tensor in expected.items():
        assert torch.equal(actual[key], tensor), key


@pytest.mark.slow
def test_without_exact_resume_a_mid_epoch_resume_differs(
    uninterrupted: dict[int, Path], tmp_path: Path
) -> None:
    """The control: the callback is what makes the resumed run exact."""
    off = ["callbacks.exact_resume=null"]
    crash = ["+callbacks.crash._target_=platekit.testing.CrashAfter", "+callbacks.crash.step=35"]
    with pytest.raises(CrashError):
        run(tmp_path, "data.num_workers=0", *off, *crash)
    run(tmp_path, "data.num_workers=0", *off, f"ckpt_path={tmp_path}/checkpoints/last.ckpt")
    with pytest.raises(AssertionError):
        assert_same_run(tmp_path, uninterrupted[0])


@pytest.mark.slow
def test_resume_after_a_max_steps_stop_mid_epoch_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Lightning counts a max_steps stop as the end of the epoch: say so, do not stay silent.

    A resume keeps the checkpoint's max_steps unless told otherwise: continuing past it is
    ``trainer.max_steps=-1`` on the command line."""
    no_step_checkpoints = "callbacks.model_checkpoint.last_every_n_steps=0"
    run(tmp_path, "+trainer.max_steps=30", no_step_checkpoints)
    last = f"ckpt_path={tmp_path}/checkpoints/last.ckpt"
    run(tmp_path, last, "+trainer.max_steps=-1", no_step_checkpoints)
    assert "the checkpoint stopped 10 batches into epoch 1" in caplog.text
    assert "the rest of epoch 1 is skipped" in caplog.text


def epoch_rows(run_dir: Path) -> dict[int, dict[str, str]]:
    """Epoch -> every train/ and val/ value metrics.csv holds for it, as written."""
    rows: dict[int, dict[str, str]] = {}
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        for row in csv.DictReader(handle):
            values = {k: v for k, v in row.items() if v and k.startswith(("train/", "val/"))}
            if row["epoch"] and values:
                rows.setdefault(int(row["epoch"]), {}).update(values)
    return rows


def test_a_mid_epoch_resume_reports_every_epoch_as_the_uninterrupted_run(
    uninterrupted: dict[int, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The interrupted epoch's train loss and accuracies cover all its steps, not only the
    ones after the resume: metrics.csv, metrics.json's history and its final row are equal."""
    reference = uninterrupted[0]
    crash = ["+callbacks.crash._target_=platekit.testing.CrashAfter", "+callbacks.crash.step=35"]
    with pytest.raises(CrashError):
        run(tmp_path, "data.num_workers=0", *crash)
    last = tmp_path / "checkpoints" / "last.ckpt"
    sums = torch.load(last, weights_only=True)["train_epoch_sums"]
    assert int(sums["confusion"].sum()) == 10 * 64  # 10 batches into epoch 1 (step 30)
    caplog.clear()
    caplog.set_level(logging.INFO)
    plain_lines = (
        "callbacks.progress_bar={_target_:platekit.training._progress.ProgressDisplay,live:false}"
    )
    run(tmp_path, "data.num_workers=0", f"ckpt_path={last}", plain_lines)
    assert "holds no running sums" not in caplog.text
    expected, actual = epoch_rows(reference), epoch_rows(tmp_path)
    assert sorted(actual) == [0, 1, 2]
    assert {"train/loss", "train/acc", "train/balanced_acc", "val/acc"} <= set(actual[1])
    assert actual == expected  # every figure of every epoch, as written
    first, second = (
        json.loads((run_dir / "metrics.json").read_text()) for run_dir in (reference, tmp_path)
    )
    assert second["final"] == first["final"]
    assert second["best"] == first["best"]
    assert second["test"] == first["test"]
    # The history the plots and the summary read: the resumed epoch keeps the lr it started
    # with (learning_rate.png), not the lr at the step it resumed from.
    history = [
        torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["callbacks"][
            "MetricHistory"
        ]["epochs"]
        for run_dir in (reference, tmp_path)
    ]
    assert history[1] == history[0]
    # The progress line of the resumed epoch shows its real speed, not 0 steps/s.
    line = next(m for m in caplog.messages if m.startswith("epoch 1/2  loss"))
    assert line.startswith(f"epoch 1/2  loss {float(expected[1]['train/loss']):.4f}  ")
    assert int(line.split()[-2].replace(",", "")) > 0, line  # 10 steps over their seconds


def test_an_optimizer_setting_a_resume_would_ignore_is_refused(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    """The checkpoint's optimizer state wins on a resume: a new lr would silently not apply."""
    last = trained["run_dir"] / "checkpoints" / "last.ckpt"
    given = ["optimizer.lr=0.0003"]
    cfg = compose_config(tmp_path / "run", [*QUICK, f"ckpt_path={last}", *given])
    with pytest.raises(module("_errors").UserError, match=r"would be ignored.*init_from="):
        module("train").train(cfg, overrides=given)
    assert not (tmp_path / "run").exists()  # refused before the run directory
    settings = module("checkpoints._run_settings")
    checkpoint = torch.load(last, weights_only=True)
    stored_lr = checkpoint["hyper_parameters"]["optimizer"]["lr"]
    same = compose_config(tmp_path / "same", [f"optimizer.lr={stored_lr}"])
    settings.refuse_ignored_optimizer_settings(  # the checkpoint's own value passes
        same, checkpoint, [f"optimizer.lr={stored_lr}"], str(last)
    )


def test_a_resume_keeps_the_checkpoints_model_when_none_is_given(tmp_path: Path) -> None:
    """``ckpt_path=...`` alone resumes an MLP run as an MLP, not the config's default CNN."""
    first = [*QUICK, "model=mlp", "trainer.max_epochs=1"]
    metrics = module("train").train(compose_config(tmp_path / "run", first), overrides=first)
    last = Path(metrics["run_dir"]) / "checkpoints" / "last.ckpt"
    again = [*QUICK, "trainer.max_epochs=2", f"ckpt_path={last}"]
    resumed = module("train").train(compose_config(tmp_path / "run", again), overrides=again)
    assert resumed["epochs"] == 2
    stored = torch.load(last, weights_only=True)["hyper_parameters"]["net"]["_target_"]
    assert stored.endswith(".MLP")


OLD_CHECKPOINT = FIXTURES / "platekit-0.1-mid-epoch.ckpt"


@pytest.mark.slow
def test_a_checkpoint_written_by_platekit_0_1_resumes_in_todays_metric_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """0.1's ``acc`` (the mean recall) is read as ``balanced_acc``, which the run goes on
    monitoring; its weights continue exactly; the epoch it stopped in has no running sums."""
    old = torch.load(OLD_CHECKPOINT, weights_only=True)
    assert "train_epoch_sums" not in old
    stored = old["callbacks"]["MetricHistory"]["epochs"][0]
    same = ["model=mlp", "model.net.hidden=[8]", "callbacks.model_checkpoint.last_every_n_steps=10"]
    # It trained under auto on a CPU with bfloat16, which was bf16-mixed then (32-true now);
    # it records no precision, so a resume says it cannot know it.
    overrides = [*QUICK, "trainer.max_epochs=3", "trainer.precision=bf16-mixed", *same]
    reference = tmp_path / "reference"
    train.train(compose_config(reference, overrides))
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    last = resumed / "checkpoints" / "last.ckpt"
    last.write_bytes(OLD_CHECKPOINT.read_bytes())
    caplog.set_level(logging.INFO)
    metrics = train.train(compose_config(resumed, [*overrides, f"ckpt_path={last}"]))
    assert "checkpoint written by platekit 0.1" in caplog.text
    assert "holds no running sums of its unfinished epoch 1" in caplog.text
    assert "does not record the precision it trained at (platekit < 0.3)" in caplog.text
    assert (metrics["monitor"], metrics["mode"]) == ("val/balanced_acc", "max")
    history = torch.load(last, weights_only=True)["callbacks"]["MetricHistory"]["epochs"]
    assert history[0]["val/balanced_acc"] == stored["val/acc"]
    assert history[0]["train/balanced_acc"] == stored["train/acc"]
    assert "val/acc" not in history[0]  # 0.1 never computed the plain accuracy
    assert {"val/acc", "val/balanced_acc"} <= set(history[2])
    expected, actual = final_state(reference), final_state(resumed)
    for key, tensor in expected.items():
        # bf16 kernels differ in the last bits between CPUs (this file was written on another
        # one): 4.0e-6 at most here, against 4.4e-3 when the resume ran at 32-true.
        torch.testing.assert_close(actual[key], tensor, rtol=0, atol=1e-4, msg=key)


def test_a_callback_setting_a_resume_would_ignore_is_refused(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    """Lightning's EarlyStopping takes its patience back from the checkpoint on a resume."""
    last = trained["run_dir"] / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    [stored] = [s["patience"] for k, s in checkpoint["callbacks"].items() if "EarlyStopping" in k]
    given = [f"callbacks.early_stopping.patience={stored + 4}"]
    cfg = compose_config(tmp_path / "run", [*QUICK, f"ckpt_path={last}", *given])
    with pytest.raises(
        module("_errors").UserError,
        match=rf"patience={stored + 4} but .* restores its EarlyStopping state "
        rf"\(callbacks.early_stopping.patience={stored}\).*would be ignored.*init_from=",
    ):
        module("train").train(cfg, overrides=given)
    assert not (tmp_path / "run").exists()  # refused before the run directory
    settings = module("checkpoints._run_settings")
    same = [f"callbacks.early_stopping.patience={stored}"]  # the checkpoint's own value passes
    settings.refuse_ignored_callback_settings(checkpoint, same, str(last))
    settings.refuse_ignored_callback_settings({"callbacks": {}}, given, str(last))  # none stored


def test_a_model_setting_given_on_a_resume_applies(tmp_path: Path) -> None:
    """Not ignored, so not refused: the net is built from the config, then the weights load
    (a net they do not fit is refused when its weights load)."""
    first = [*QUICK, "model=mlp", "trainer.max_epochs=1"]
    metrics = module("train").train(compose_config(tmp_path / "run", first), overrides=first)
    last = Path(metrics["run_dir"]) / "checkpoints" / "last.ckpt"
    again = [*QUICK, "model=mlp", "model.net.dropout=0.25", "trainer.max_epochs=2"]
    again.append(f"ckpt_path={last}")
    resumed = module("train").train(compose_config(tmp_path / "run", again), overrides=again)
    assert resumed["epochs"] == 2
    stored = torch.load(last, weights_only=True)["hyper_parameters"]["net"]
    assert stored["dropout"] == 0.25


def test_resuming_a_run_early_stopping_ended_trains_nothing_more(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Lightning restores early stopping's state but not its stop: each resume of a finished
    run (a requeue script's ``ckpt_path=last``) trained one more epoch and rewrote it."""
    given = [*QUICK, "trainer.max_epochs=15", "callbacks.early_stopping.patience=1"]
    first = train.train(compose_config(tmp_path / "run", given), overrides=given)
    assert first["early_stop"] is not None
    assert first["epochs"] < 15
    last = Path(first["run_dir"]) / "checkpoints" / "last.ckpt"
    written = last.read_bytes()
    again = [*given, f"ckpt_path={last}"]
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="platekit"):
            resumed = train.train(compose_config(tmp_path / "run", again), overrides=again)
        assert last.read_bytes() == written  # nothing trained, nothing saved
        for key in ("epochs", "steps", "test", "final", "best", "early_stop", "per_class"):
            assert resumed[key] == first[key], key
        stopped = first["early_stop"]["epoch"]
        said = f"early stopping had ended this run after epoch {stopped}: nothing more to train"
        assert said in caplog.text
