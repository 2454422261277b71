"""Checkpoints describe themselves: eval, export and predict need only the checkpoint.

What a checkpoint may make the project build is tested in ``test_checkpoint_safety.py``."""

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from support import compose_config, module

UserError = module("_errors").UserError
evaluate = module("eval").evaluate


def test_eval_needs_only_the_checkpoint_and_warns_on_an_override(
    trained: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = trained["metrics"]["best_checkpoint"]
    plain = evaluate(compose_config(tmp_path / "a", [f"ckpt_path={checkpoint}"], "eval"))
    assert plain["test"]["test/acc"] == pytest.approx(trained["metrics"]["test"]["test/acc"])
    with caplog.at_level(logging.WARNING):
        batches = [f"ckpt_path={checkpoint}", "+data.eval_batch_size=100"]
        other = evaluate(compose_config(tmp_path / "b", batches, "eval"))
    assert "data.eval_batch_size=100 overrides the checkpoint's 512" in caplog.text
    assert other["test"]["test/acc"] == plain["test"]["test/acc"]  # the same rows
    # another seed is another split: its "test" rows are not the checkpoint's, refused
    reseeded = [f"ckpt_path={checkpoint}", "+data.seed=1"]
    with pytest.raises(UserError, match=r"the test split is not the one .* content differs"):
        evaluate(compose_config(tmp_path / "c", reseeded, "eval"))


@pytest.mark.slow
def test_a_table_that_moved_is_one_line_naming_the_stored_path(tmp_path: Path) -> None:
    table = tmp_path / "table.csv"
    settings = module("data").CsvDataModule.make_fixture(tmp_path)
    overrides = ["data=csv", "model=mlp", "trainer.max_epochs=1", "callbacks.progress_bar=null"]
    overrides += [f"data.{key}={value}" for key, value in settings.items()]
    metrics = module("train").train(compose_config(tmp_path / "run", overrides))
    moved = tmp_path / "moved.csv"
    shutil.move(table, moved)
    checkpoint = metrics["best_checkpoint"]
    # The project's own (sealed) checkpoint follows its stored path, and says it is gone.
    with pytest.raises(UserError, match=rf"cannot be read: data.path '{table}' is not a file"):
        evaluate(compose_config(tmp_path / "e0", [f"ckpt_path={checkpoint}"], "eval"))
    named = [f"ckpt_path={checkpoint}", f"+data.path={table}"]
    with pytest.raises(
        UserError, match=rf"cannot be read: data.path '{table}' is not a file.*data\.path="
    ):
        evaluate(compose_config(tmp_path / "e1", named, "eval"))
    scores = evaluate(
        compose_config(tmp_path / "e2", [f"ckpt_path={checkpoint}", f"+data.path={moved}"], "eval")
    )
    assert scores["test"]["test/acc"] == pytest.approx(metrics["test"]["test/acc"])
