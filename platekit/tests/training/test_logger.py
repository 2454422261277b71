"""Every metric logger the project ships records a short real run where its README says."""

import sqlite3
from pathlib import Path

import pytest

from support import CONFIG_DIR, compose_config, module

# What each logger leaves behind, as a glob under the run directory or the outputs folder.
RECORDS = {
    "csv": ("run", "csv/metrics.csv"),
    "tensorboard": ("run", "tensorboard/events.out.tfevents.*"),
    "wandb": ("run", "wandb/offline-run-*/run-*.wandb"),
    "mlflow": ("outputs", "mlflow.db"),
}
SHIPPED = sorted(path.stem for path in (CONFIG_DIR / "logger").glob("*.yaml"))
TINY = [
    "debug=limit",
    "trainer.max_epochs=1",
    "trainer.log_every_n_steps=1",
    "trainer.accelerator=cpu",
    "callbacks.progress_bar=null",
]


def test_every_shipped_logger_is_known() -> None:
    assert set(SHIPPED) <= set(RECORDS)
    assert {"csv", "tensorboard"} <= set(SHIPPED)


def test_default_logger_is_a_shipped_one(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path)
    assert list(cfg.logger) in [[name] for name in SHIPPED]


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_logger_records_a_run(name: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "outputs" / "train" / "runs" / "run"
    cfg = compose_config(run_dir, [f"logger={name}", f"paths.root_dir={tmp_path}", *TINY])
    module("train").train(cfg)
    where, pattern = RECORDS[name]
    base = run_dir if where == "run" else tmp_path / "outputs"
    found = sorted(base.glob(pattern))
    assert found, f"no {pattern} under {base}"
    assert all(path.stat().st_size > 0 for path in found)
    if name == "mlflow":
        assert logged_to_mlflow(found[0]) >= {"train/loss", "val/acc", "test/acc"}


def logged_to_mlflow(database: Path) -> set[str]:
    """The metric names an MLflow SQLite store holds."""
    with sqlite3.connect(database) as connection:
        return {key for (key,) in connection.execute("SELECT DISTINCT key FROM metrics")}
