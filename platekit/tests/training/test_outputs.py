"""What a run leaves for people: the summary in metrics.json and the log, plots, the config tree."""

from pathlib import Path
from typing import Any

import pytest
import torch
from matplotlib.image import imread

from support import QUICK, compose_config, module, read_json

summary = module("training._summary")
console = module("training._console")

PLOTS = {"loss.png", "accuracy.png", "learning_rate.png", "confusion_matrix.png", "per_class.png"}


def test_default_run_writes_every_plot(trained: dict[str, Any]) -> None:
    plot_dir = trained["run_dir"] / "plots"
    assert {p.name for p in plot_dir.iterdir()} == PLOTS


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_is_a_real_image(trained: dict[str, Any], name: str) -> None:
    path = trained["run_dir"] / "plots" / name
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(path)  # (H, W, RGBA), floats in [0, 1]
    height, width = pixels.shape[:2]
    assert height >= 300
    assert width >= 500
    assert pixels[..., :3].std() > 0.05  # something is drawn, not a blank canvas


def test_metrics_json_holds_the_summary(trained: dict[str, Any]) -> None:
    metrics = read_json(trained["run_dir"] / "metrics.json")
    assert set(metrics) >= {
        "test", "best_checkpoint", "epochs", "steps", "fit_seconds", "run_dir",
        "best", "final", "wall_seconds", "steps_per_second", "peak_memory_mb",
    }  # fmt: skip
    best, final = metrics["best"], metrics["final"]
    assert final["epoch"] == 2  # 3 epochs, counted from 0 like the checkpoint names
    assert best["val/acc"] >= final["val/acc"]
    assert Path(metrics["best_checkpoint"]).name == f"epoch_{best['epoch']:03d}.ckpt"
    assert {"lr", "train/loss", "train/acc", "val/loss", "val/acc"} <= set(final)
    # steps/s: optimizer steps over training seconds, validation and start-up out of both.
    assert metrics["train_steps"] == metrics["steps"] == 60
    assert 0 < metrics["train_seconds"] < metrics["fit_seconds"]
    assert metrics["steps_per_second"] == pytest.approx(
        metrics["train_steps"] / metrics["train_seconds"], rel=0.01
    )
    # Wall time counts from the process's start: start-up (imports, config) is in it.
    assert metrics["wall_clock_from"] == "process start"
    assert metrics["imports_seconds"] <= metrics["startup_seconds"]
    assert metrics["wall_seconds"] >= metrics["startup_seconds"] + metrics["fit_seconds"]
    assert metrics["peak_memory_mb"]["host"] > 50


def test_metrics_json_holds_the_per_class_table_of_the_test_split(trained: dict[str, Any]) -> None:
    """Precision, recall and support per class; the test accuracies follow from them."""
    metrics = read_json(trained["run_dir"] / "metrics.json")
    table, test = metrics["per_class"], metrics["test"]
    assert list(table) == [str(digit) for digit in range(10)]  # the data's class names
    supports = [row["support"] for row in table.values()]
    assert sum(supports) == 269  # the test split (1,797 rows, 15 %)
    hits = [round(row["recall"] * row["support"]) for row in table.values()]
    assert test["test/acc"] == sum(hits) / 269  # counts over counts, exactly
    recalls = [hit / support for hit, support in zip(hits, supports, strict=True)]
    assert test["test/balanced_acc"] == pytest.approx(sum(recalls) / 10, abs=1e-12)
    text = summary.summary_table(metrics, trained["run_dir"])
    assert "test split per class (best checkpoint)" in text
    first = table["0"]
    assert f"│ 0     │    {first['precision']:.4f} │ {first['recall']:.4f} │      " in text


def test_confusion_matrix_plot_names_classes_and_both_accuracies() -> None:
    plots = module("training._plots")
    matrix = torch.tensor([[8, 2], [1, 1]])
    figure = plots.confusion_figure(matrix, ["cat", "dog"])
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["cat", "dog"]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["cat", "dog"]
    # plain 9/12; balanced (8/10 + 1/2) / 2
    assert axes.get_title() == "Confusion matrix, test split\nacc 0.7500, balanced_acc 0.6500"


def test_summary_table_shows_best_final_and_run_facts(trained: dict[str, Any]) -> None:
    metrics = trained["metrics"]
    text = summary.summary_table(metrics, trained["run_dir"])
    best_epoch = metrics["best"]["epoch"]
    assert f"best (epoch {best_epoch})" in text
    assert "final (epoch 2)" in text
    assert f"checkpoints/epoch_{best_epoch:03d}.ckpt" in text
    assert f"{metrics['test']['test/acc']:.4f}" in text
    for fact in ("epochs / steps   3 / 60", "wall time", "steps/s", "peak memory"):
        assert fact in text


def test_objective_reads_the_best_epoch_or_the_test_results(trained: dict[str, Any]) -> None:
    metrics = trained["metrics"]
    assert summary.objective(metrics, "val/acc") == metrics["best"]["val/acc"]
    assert summary.objective(metrics, "test/acc") == metrics["test"]["test/acc"]
    with pytest.raises(module("_errors").UserError, match="val/accuracy is not a logged"):
        summary.objective(metrics, "val/accuracy")


def test_config_tree_shows_groups_and_values_verbatim(tmp_path: Path) -> None:
    text = console.as_text(console.config_tree(compose_config(tmp_path)))
    assert text.splitlines()[0] == "config"
    assert "── model" in text
    assert "channels: [32, 64]" in text  # brackets are data, not rich markup
    assert "hydra" not in text


@pytest.mark.slow
def test_resumed_run_keeps_the_history_of_earlier_epochs(tmp_path: Path) -> None:
    train = module("train").train
    first = train(compose_config(tmp_path / "a", [*QUICK, "trainer.max_epochs=2"]))
    last = tmp_path / "a" / "checkpoints" / "last.ckpt"
    longer = [*QUICK, "trainer.max_epochs=3", f"ckpt_path={last}"]  # given: the run grows
    resumed = train(compose_config(tmp_path / "b", longer), longer)
    assert resumed["final"]["epoch"] == 2
    assert resumed["best"]["val/acc"] >= first["best"]["val/acc"]
    rows = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt")["callbacks"]["MetricHistory"]
    assert [row["epoch"] for row in rows["epochs"]] == [0, 1, 2]
    assert rows["epochs"][1] == first["final"]
