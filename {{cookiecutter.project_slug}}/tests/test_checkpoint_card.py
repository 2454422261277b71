"""Checkpoints describe themselves: eval, export and predict need only the checkpoint, and
build nothing a checkpoint names unless it is on the allowlist."""

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from support import compose_config, module

UserError = module("cli.errors").UserError
evaluate = module("eval").evaluate
export = module("export").export
predict = module("predict").predict

# Callables a hostile checkpoint might name, with arguments that leave a trace if called.
HOSTILE = {
    "shutil.copyfile": lambda marker: {"src": __file__, "dst": str(marker)},
    "builtins.open": lambda marker: {"file": str(marker), "mode": "w"},
    "subprocess.run": lambda marker: {"args": ["touch", str(marker)]},
    "os.remove": lambda marker: {"path": str(marker)},
}


def hostile_checkpoint(good: Path, tmp_path: Path, target: str, where: str) -> tuple[Path, Path]:
    """A copy of ``good`` naming ``target`` at ``where``; the marker file it would touch."""
    marker = tmp_path / "marker"
    if target == "os.remove":
        marker.write_text("must survive")
    checkpoint = torch.load(good, weights_only=True)
    node = {"_target_": target, **HOSTILE[target](marker)}
    if where == "net":
        checkpoint["hyper_parameters"]["net"] = node
    elif where == "optimizer":
        checkpoint["hyper_parameters"]["optimizer"] = node
    elif where == "data":
        checkpoint["data"]["_target_"] = target
    elif where == "data_args":
        checkpoint["data"]["args"]["nested"] = node
    else:
        checkpoint["model"]["_target_"] = target
    path = tmp_path / "hostile.ckpt"
    module("checkpoints.io").save_checkpoint(checkpoint, path)  # sealed: only the target is bad
    return path, marker


def entry_point(name: str, path: Path, out: Path, inputs: Path) -> None:
    if name == "eval":
        evaluate(compose_config(out, [f"ckpt_path={path}"], config_name="eval"))
    elif name == "export":
        export(compose_config(out, [f"ckpt_path={path}"], config_name="export"))
    else:
        overrides = [f"model_path={path}", f"inputs={inputs}"]
        predict(compose_config(out, overrides, config_name="predict"))


PLACES = ["net", "optimizer", "data", "data_args", "model"]
ENTRIES = ["eval", "export", "predict"]
# Every callable in every place; the entry point turns with each case, so all three see
# every place and every callable (the full product runs in the slow tier).
CASES = [
    (entry, where, target)
    for index, (where, target) in enumerate((w, t) for w in PLACES for t in sorted(HOSTILE))
    for entry in [ENTRIES[index % len(ENTRIES)]]
]
ALL_CASES = [(e, w, t) for e in ENTRIES for w in PLACES for t in sorted(HOSTILE)]
SLOW_CASES = [
    pytest.param(*case, marks=pytest.mark.slow) for case in ALL_CASES if case not in CASES
]


@pytest.mark.parametrize(("entry", "where", "target"), [*CASES, *SLOW_CASES])
def test_targets_outside_the_allowlist_are_refused_before_anything_runs(
    trained: dict[str, Any], tmp_path: Path, target: str, where: str, entry: str
) -> None:
    good = Path(trained["metrics"]["best_checkpoint"])
    path, marker = hostile_checkpoint(good, tmp_path, target, where)
    before = marker.read_text() if marker.exists() else None
    inputs = tmp_path / "x.npy"
    import numpy as np

    np.save(inputs, np.zeros((2, 1, 8, 8), np.float32))
    with pytest.raises(UserError, match=rf"names '{target}' at .*not on the allowlist"):
        entry_point(entry, path, tmp_path / "out", inputs)
    assert (marker.read_text() if marker.exists() else None) == before  # nothing was called


def test_eval_needs_only_the_checkpoint_and_warns_on_an_override(
    trained: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = trained["metrics"]["best_checkpoint"]
    plain = evaluate(compose_config(tmp_path / "a", [f"ckpt_path={checkpoint}"], "eval"))
    assert plain["test"]["test/acc"] == pytest.approx(trained["metrics"]["test"]["test/acc"])
    with caplog.at_level(logging.WARNING):
        other = evaluate(
            compose_config(tmp_path / "b", [f"ckpt_path={checkpoint}", "+data.seed=1"], "eval")
        )
    assert "data.seed=1 overrides the checkpoint's 0" in caplog.text
    assert other["test"] != plain["test"]  # another split: the override really applied


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
    with pytest.raises(
        UserError, match=rf"cannot be read: data.path '{table}' is not a file.*data\.path="
    ):
        evaluate(compose_config(tmp_path / "e1", [f"ckpt_path={checkpoint}"], "eval"))
    scores = evaluate(
        compose_config(tmp_path / "e2", [f"ckpt_path={checkpoint}", f"+data.path={moved}"], "eval")
    )
    assert scores["test"]["test/acc"] == pytest.approx(metrics["test"]["test/acc"])
