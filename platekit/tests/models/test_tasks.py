"""The task declares its metrics (no name spelled elsewhere); a regression runs end to end;
a resume cannot silently change the run's data split, and reads its checkpoint once."""

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from support import CONFIG_DIR, PACKAGE, QUICK, ROOT, compose_config, module, read_json, run_cli

train = module("train")
UserError = module("_errors").UserError
keep_run_settings = module("checkpoints._run_settings").keep_run_settings
KIT = Path(module("models").__file__).parents[1]  # platekit's source
SOURCES = [KIT, ROOT / "src" / PACKAGE]  # the kit's and the project's code
DECLARATION = KIT / "models" / "_tasks.py"
# A metric name as code or config writes it: 'val/acc', "train/loss", monitor: val/rmse
METRIC_NAME = re.compile(
    r"""(?:["'\s:]|^)(?:train|val|test)/(?!(?:train|val|test)\b)[a-z_0-9]+""", re.MULTILINE
)
SHORT = [
    *QUICK, "trainer.max_epochs=1", "+trainer.limit_train_batches=3",
    "+trainer.limit_val_batches=1", "+trainer.limit_test_batches=1",
]  # fmt: skip


def test_no_metric_name_is_spelled_outside_the_task_declaration() -> None:
    files = [path for source in SOURCES for path in source.rglob("*.py")]
    assert DECLARATION in files
    assert len(files) > 50
    files += CONFIG_DIR.rglob("*.yaml")
    found = {
        f"{path}: {match.group().strip()}"
        for path in files
        if path != DECLARATION
        for match in METRIC_NAME.finditer(path.read_text())
    }
    assert not found
    classification = module("models").Classification(3)
    # stable for dashboards; acc is plain accuracy, balanced_acc the mean recall
    assert classification.names("val") == ["val/loss", "val/acc", "val/balanced_acc"]
    assert (classification.monitor, classification.mode) == ("val/acc", "max")
    balanced = module("models").Classification(3, monitor="balanced_acc")
    assert (balanced.monitor, balanced.mode) == ("val/balanced_acc", "max")
    with pytest.raises(UserError, match=r"model.task.monitor=f1 is not a metric of Classif"):
        module("models").Classification(3, monitor="f1")
    regression = module("models").Regression()
    assert regression.names("test") == ["test/loss", "test/mae", "test/rmse", "test/r2"]
    assert (regression.monitor, regression.mode) == ("val/rmse", "min")


def test_callbacks_follow_the_task_monitor(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, QUICK)
    trainer = module("training._trainer").build_trainer(cfg, task=module("models").Regression())
    picked = {
        type(c).__name__: (c.monitor, c.mode) for c in trainer.callbacks if hasattr(c, "mode")
    }
    assert picked == {
        "PreemptibleCheckpoint": ("val/rmse", "min"),
        "EarlyStopping": ("val/rmse", "min"),
    }


def test_the_task_monitor_setting_moves_checkpointing_and_early_stopping(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*SHORT, "model.task.monitor=balanced_acc"])
    metrics = train.train(cfg)
    assert (metrics["monitor"], metrics["mode"]) == ("val/balanced_acc", "max")
    checkpoint = torch.load(metrics["best_checkpoint"], weights_only=True)
    assert checkpoint["hyper_parameters"]["task"]["monitor"] == "balanced_acc"
    monitors = {
        key.split("'monitor': ")[1].split(",")[0]
        for key in checkpoint["callbacks"]
        if "monitor" in key
    }
    assert monitors == {"'val/balanced_acc'"}


def test_moved_keys_get_a_hint_naming_the_new_key() -> None:
    hints = module("config._typos").nearest_names(
        CONFIG_DIR, "train", ["model.optimizer.lr=0.1", "model.scheduler.T_max=3"]
    )
    assert hints[0].startswith("key 'model.optimizer.lr' has moved to 'optimizer.lr'")
    assert hints[1].startswith("key 'model.scheduler.T_max' is gone")


def test_a_model_config_with_an_optimizer_is_refused_naming_the_group(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*SHORT, "+model.optimizer.lr=0.1"])
    with pytest.raises(UserError, match=r"model\.optimizer has moved to the optimizer group"):
        train.train(cfg)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("short")
    train.train(compose_config(run_dir, SHORT))
    last = run_dir / "checkpoints" / "last.ckpt"
    return {"run_dir": run_dir, "last": last, "content": torch.load(last, weights_only=True)}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "seed=1",
            r"^seed=1 but the checkpoint '.*' was trained with seed=0: .*init_from=.* seed=1$",
        ),
        ("data.val_fraction=0.2", r"^data\.val_fraction=0\.2 but .* with data\.val_fraction=0\.15"),
        ("data.batch_size=16", r"^data\.batch_size=16 but .* with data\.batch_size=64"),
        ("data=csv", r"^data=csv but .* with data=.*DigitsDataModule"),
    ],
)
def test_resume_refuses_an_explicit_change_of_the_data_split(
    short_run: dict[str, Any], override: str, message: str, tmp_path: Path
) -> None:
    cfg = compose_config(tmp_path, [override])
    with pytest.raises(UserError, match=message):
        keep_run_settings(cfg, short_run["content"], [override], str(short_run["last"]))


def test_resume_takes_a_differently_defaulted_setting_from_the_checkpoint(
    short_run: dict[str, Any], tmp_path: Path
) -> None:
    # as if the YAML defaults had changed since the run started: not typed, so not a change
    cfg = compose_config(tmp_path, ["seed=5", "data.val_fraction=0.3", "data.num_workers=2"])
    keep_run_settings(cfg, short_run["content"], [], str(short_run["last"]))
    assert (cfg.seed, cfg.data.seed, cfg.data.val_fraction) == (0, 0, 0.15)
    assert cfg.data.num_workers == 2  # how batches are loaded may change


@pytest.mark.slow
def test_resume_reads_the_checkpoint_once(
    short_run: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    train.train(compose_config(run_dir, SHORT))
    last = (run_dir / "checkpoints" / "last.ckpt").resolve()
    reads: list[Path] = []
    load = torch.load

    def counting_load(path: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(path, str | Path):
            reads.append(Path(path).resolve())
        return load(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counting_load)
    resumed = [*SHORT, "trainer.max_epochs=2", f"ckpt_path={last}"]
    assert train.train(compose_config(run_dir, resumed), overrides=resumed)["epochs"] == 2
    assert reads.count(last) == 1


def digest(run_dir: Path) -> dict[str, str]:
    """Every file of the run and its hash; Hydra's own .hydra/ notes of the last command and
    the run lock (it names the pid of whoever last held it) aside."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
        and ".hydra" not in p.relative_to(run_dir).parts
        and p.name not in ("train.log", ".run.lock")
    }


@pytest.mark.slow
def test_cli_resume_with_a_changed_seed_or_fraction_exits_1_and_changes_nothing(
    tmp_path: Path,
) -> None:
    first = run_cli("train", *SHORT, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    before, log = digest(run_dir), (run_dir / "train.log").read_text()
    for override, old in (("seed=1", "seed=0"), ("data.test_fraction=0.3", "test_fraction=0.15")):
        result = run_cli("train", *SHORT, "ckpt_path=last", override, cwd=tmp_path)
        assert result.returncode == 1
        output = result.stdout + result.stderr
        errors = [line for line in output.splitlines() if "error:" in line]
        assert len(errors) == 1, output
        assert override in errors[0]
        assert old in errors[0]
        assert "init_from=" in errors[0]
        assert digest(run_dir) == before
        # Hydra's log file only gains the refused command's lines (Hydra opens it first)
        assert (run_dir / "train.log").read_text().startswith(log)


@pytest.mark.slow
def test_regression_trains_evaluates_exports_and_predicts_values(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    overrides = [*QUICK, "data=diabetes", "model=mlp", "trainer.max_epochs=2"]
    overrides.append(f"paths.data_dir={tmp_path / 'data'}")
    metrics = train.train(compose_config(run_dir, overrides))
    assert set(metrics["test"]) == {"test/loss", "test/mae", "test/rmse", "test/r2"}
    assert (metrics["monitor"], metrics["mode"]) == ("val/rmse", "min")
    assert metrics["test"]["test/rmse"] < 120  # the targets' spread is about 77
    assert read_json(run_dir / "metrics.json")["best"]["val/rmse"] > 0
    plots = {p.name for p in (run_dir / "plots").glob("*.png")}
    assert plots == {"loss.png", "error.png", "r2.png", "learning_rate.png"}

    best = metrics["best_checkpoint"]
    table = tmp_path / "data" / "diabetes.csv"
    # The example table was written outside the project: eval and export read it only when
    # its paths are named again.
    named = [f"+data.path={table}", f"+data.data_dir={tmp_path / 'data'}"]
    evaluated = module("eval").evaluate(
        compose_config(tmp_path / "eval", [f"ckpt_path={best}", *named], config_name="eval")
    )
    assert evaluated["test"]["test/rmse"] == pytest.approx(metrics["test"]["test/rmse"], rel=1e-5)

    export_dir = tmp_path / "export"
    report = module("export").export(
        compose_config(export_dir, [f"ckpt_path={best}", "repeats=2", *named], "export")
    )
    assert [o["name"] for o in report["outputs"]] == ["values"]
    assert all(row["max_abs_diff"] < 1e-3 for row in report["parity"])

    rows = module("predict").predict(
        compose_config(
            tmp_path / "predict",
            [f"model_path={export_dir / 'model.onnx'}", f"inputs={table}"],
            config_name="predict",
        )
    )
    assert len(rows) == 442
    assert set(rows[0]) == {"input", "value", "outside_training_range"}  # and its range flag
    assert 25 < sum(r["value"] for r in rows) / len(rows) < 346  # within the targets' range


def test_class_weights_weigh_the_loss_as_computed_by_hand() -> None:
    weights = [1.0, 2.0, 5.0]
    task = module("models").Classification(3, class_weights=weights)
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-1.0, 3.0, 0.0], [0.0, 0.0, 4.0]])
    targets = torch.tensor([0, 2, 1, 2])
    nll = -torch.log_softmax(logits, dim=1)[torch.arange(4), targets]
    w = torch.tensor(weights)[targets]
    assert task.loss(logits, targets).item() == pytest.approx(((w * nll).sum() / w.sum()).item())
    plain = module("models").Classification(3).loss(logits, targets).item()
    assert plain == pytest.approx(nll.mean().item())


def test_balanced_class_weights_come_from_the_train_split(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*SHORT, "model.task.class_weights=balanced"])
    datamodule, model, _ = module("training._trainer").build_parts(cfg)
    targets = datamodule.targets("train")
    counts = torch.bincount(targets, minlength=10).tolist()
    assert len(set(counts)) > 1  # digits' classes are not all the same size
    by_hand = [len(targets) / (10 * count) for count in counts]
    assert model.hparams.task["class_weights"] == pytest.approx(by_hand)
    assert model.task.class_weights == pytest.approx(by_hand)
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(len(targets), 10, generator=generator)
    nll = -torch.log_softmax(logits, dim=1)[torch.arange(len(targets)), targets]
    # Each class weighs the same in total: the loss is the mean over classes of class means.
    per_class = torch.stack([nll[targets == c].mean() for c in range(10)])
    weighted = model.task.loss(logits, targets).item()
    assert weighted == pytest.approx(per_class.mean().item(), rel=1e-5)
    assert weighted != pytest.approx(nll.mean().item(), rel=1e-5)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ("[1,2]", r"class_weights has 2 weights but the data has 10 classes"),
        ("[1,1,1,1,1,1,1,1,1,-1]", r"each weight must be a finite number >= 0"),
        ("heavy", r"class_weights='heavy': give `balanced` or one weight per class"),
    ],
)
def test_bad_class_weights_are_refused_in_one_line(
    tmp_path: Path, weights: str, message: str
) -> None:
    cfg = compose_config(tmp_path / "run", [*SHORT, f"model.task.class_weights={weights}"])
    with pytest.raises(UserError, match=message):
        train.train(cfg)
    assert not (tmp_path / "run").exists()  # refused before the run directory


def test_class_weights_on_a_regression_are_refused(tmp_path: Path) -> None:
    overrides = [*SHORT, "data=diabetes", "model=mlp", "model.task.class_weights=[1,2]"]
    overrides.append(f"paths.data_dir={tmp_path / 'data'}")
    with pytest.raises(UserError, match=r"model.task.class_weights is not a setting of Regr"):
        train.train(compose_config(tmp_path / "run", overrides))
