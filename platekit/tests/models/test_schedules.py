"""Optimizer and scheduler groups: every preset steps, warm-up follows its formula, a run
extended to more epochs is re-planned over its new total, never at lr 0."""

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from lightning import Callback, LightningModule, Trainer

from support import CONFIG_DIR, QUICK, compose_config, module, project_module

train = module("train")
build_model = module("models._build").build_model
DigitsDataModule = project_module("data").DigitsDataModule
UserError = module("_errors").UserError

OPTIMIZERS = sorted(p.stem for p in (CONFIG_DIR / "optimizer").glob("*.yaml"))
SCHEDULERS = sorted(p.stem for p in (CONFIG_DIR / "scheduler").glob("*.yaml"))
BASE_LR = 0.003  # optimizer=adamw


class StepLrs(Callback):
    """The lr each optimizer step ran at, by global step (appended to ``path``)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: LightningModule, optimizer: Any
    ) -> None:
        with self.path.open("a") as handle:
            handle.write(f"{trainer.global_step} {optimizer.param_groups[0]['lr'].hex()}\n")


def step_lrs(path: Path) -> dict[int, float]:
    pairs = (line.split() for line in path.read_text().splitlines())
    return {int(step): float.fromhex(lr) for step, lr in pairs}


def lr_logging(path: Path) -> list[str]:
    return ["+callbacks.lrs._target_=test_schedules.StepLrs", f"+callbacks.lrs.path={path}"]


def cosine(step: int, total: int, warmup: int = 0) -> float:
    if step < warmup:
        return BASE_LR * (step + 1) / warmup
    return BASE_LR * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


@pytest.fixture(scope="module")
def digits() -> Any:
    return DigitsDataModule().info


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_optimizer_and_scheduler_preset_steps(
    optimizer: str, scheduler: str, digits: Any, tmp_path: Path
) -> None:
    cfg = compose_config(
        tmp_path, ["model=mlp", f"optimizer={optimizer}", f"scheduler={scheduler}"]
    )
    model = build_model(cfg.model, digits, optimizer=cfg.optimizer, scheduler=cfg.scheduler)
    opt = model.build_optimizer()
    assert [group["weight_decay"] for group in opt.param_groups][1] == 0.0  # biases, norms
    schedule = instantiate(model.hparams.scheduler, _partial_=True)(
        opt, total_steps=8, steps_per_epoch=4
    )
    before = [p.detach().clone() for p in model.parameters()]
    inputs, targets = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        loss = model.task.loss(model(inputs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    assert all(math.isfinite(lr) and lr > 0 for lr in lrs), lrs
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_warmup_lr_at_step_k_follows_the_formula() -> None:
    schedules = module("models._schedules")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=BASE_LR)
    schedule = schedules.Cosine(opt, total_steps=10, warmup_steps=4)
    for step in range(10):
        assert opt.param_groups[0]["lr"] == pytest.approx(cosine(step, 10, warmup=4), rel=1e-12)
        opt.step()
        schedule.step()


@pytest.mark.slow
def test_warmup_epochs_count_optimizer_steps_with_gradient_accumulation(tmp_path: Path) -> None:
    # 6 batches an epoch, 2 per optimizer step: 3 optimizer steps an epoch, 6 in the run.
    lrs = tmp_path / "lrs"
    overrides = [
        *QUICK, "trainer.max_epochs=2", "+trainer.limit_train_batches=6",
        "+trainer.limit_val_batches=1", "trainer.accumulate_grad_batches=2",
        "scheduler=warmup_cosine", "scheduler.warmup_epochs=1", "callbacks.early_stopping=null",
        *lr_logging(lrs),
    ]  # fmt: skip
    train.train(compose_config(tmp_path / "run", overrides))
    expected = {step: cosine(step, 6, warmup=3) for step in range(6)}
    assert step_lrs(lrs) == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_extending_a_finished_run_replans_the_cosine_over_the_new_total(tmp_path: Path) -> None:
    """2 epochs, then `ckpt_path=... trainer.max_epochs=4`: the documented re-plan."""
    lrs = tmp_path / "lrs"
    run_dir = tmp_path / "run"
    base = [
        *QUICK, "+trainer.limit_train_batches=5", "+trainer.limit_val_batches=1",
        "callbacks.early_stopping=null", *lr_logging(lrs),
    ]  # fmt: skip
    first = train.train(compose_config(run_dir, [*base, "trainer.max_epochs=2"]))
    assert first["epochs"] == 2
    last = run_dir / "checkpoints" / "last.ckpt"
    resumed = [*base, "trainer.max_epochs=4", f"ckpt_path={last}"]
    metrics = train.train(compose_config(run_dir, resumed), overrides=resumed)
    assert metrics["steps"] == 20
    recorded = step_lrs(lrs)
    # epochs 0-1 on the 2-epoch curve (10 steps); epochs 2-3 on the 4-epoch curve (20 steps)
    expected = {k: cosine(k, 10) for k in range(10)} | {k: cosine(k, 20) for k in range(10, 20)}
    assert recorded == pytest.approx(expected, rel=1e-12)
    assert min(recorded.values()) > 0  # never a step at lr 0


@pytest.mark.slow
def test_onecycle_refuses_to_change_its_length_on_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    base = [
        *QUICK, "+trainer.limit_train_batches=3", "+trainer.limit_val_batches=1",
        "callbacks.early_stopping=null", "scheduler=onecycle",
    ]  # fmt: skip
    train.train(compose_config(run_dir, [*base, "trainer.max_epochs=1"]))
    last = run_dir / "checkpoints" / "last.ckpt"
    resumed = [*base, "trainer.max_epochs=2", f"ckpt_path={last}"]
    with pytest.raises(
        UserError, match=r"scheduler=onecycle cannot change length on resume: .* 3 "
    ):
        train.train(compose_config(run_dir, resumed), overrides=resumed)


def test_a_run_without_a_length_is_refused_for_a_planned_schedule(tmp_path: Path) -> None:
    overrides = [*QUICK, "trainer.max_epochs=-1", "callbacks.early_stopping=null"]
    with pytest.raises(UserError, match=r"lr schedule needs the run's length.*scheduler=none"):
        train.train(compose_config(tmp_path, overrides))
