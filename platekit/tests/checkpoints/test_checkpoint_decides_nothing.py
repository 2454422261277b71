"""A checkpoint says what was trained, not how this process runs or where it writes.

Its worker count is not used by eval, export or predict; a data path it stores inside the
project's source tree or the installed packages is refused; its random-number states and
sampler position are checked for type, size and range before a resume uses them. Each case
holds for a checkpoint this project sealed, and for one from elsewhere.
"""

import copy
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import torch

from support import PACKAGE, ROOT, module, one_error_line, run_cli, with_checkpoint

Checkpoint = module("checkpoints._restore").Checkpoint
save_checkpoint = module("checkpoints._io").save_checkpoint
UserError = module("_errors").UserError


def edited(good: Path, path: Path, edit: Any) -> Path:
    content = copy.deepcopy(torch.load(good, weights_only=True))
    edit(content)
    save_checkpoint(content, path)
    return path


@pytest.mark.parametrize("stored", [24, 1])
def test_a_checkpoints_worker_count_is_not_used(
    trained: dict[str, Any], tmp_path: Path, stored: int
) -> None:
    def edit(content: dict[str, Any]) -> None:
        content["data"]["args"]["num_workers"] = stored

    path = edited(Path(trained["metrics"]["best_checkpoint"]), tmp_path / "w.ckpt", edit)
    datamodule = Checkpoint.open(path).datamodule()
    assert getattr(datamodule.test_dataloader(), "num_workers", 0) == 0
    given = Checkpoint.open(path).datamodule({"num_workers": 1})  # the command line decides
    assert given.test_dataloader().num_workers == 1


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["eval", "predict"])
def test_eval_and_predict_start_no_workers_a_checkpoint_asks_for(
    trained: dict[str, Any], tmp_path: Path, entry: str
) -> None:
    def edit(content: dict[str, Any]) -> None:
        content["data"]["args"]["num_workers"] = 24

    path = edited(Path(trained["metrics"]["best_checkpoint"]), tmp_path / "w.ckpt", edit)
    result = run_cli(entry, *with_checkpoint(entry, path, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "num_workers" not in result.stdout + result.stderr  # nothing to say: not used


def code_places() -> dict[str, str]:
    """Stored data paths naming where code lives: the source tree, site-packages, platekit."""
    package_dir = Path(module("_registry").__file__).parent
    return {
        "source tree": f"src/{PACKAGE}/x",
        "site-packages": str(Path(sysconfig.get_path("purelib")) / "x"),
        "platekit": str(package_dir / "data"),
    }


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
@pytest.mark.parametrize("place", ["source tree", "site-packages", "platekit"])
def test_a_stored_data_path_among_code_is_refused(
    trained: dict[str, Any], tmp_path: Path, place: str, sealed: bool
) -> None:
    where = code_places()[place]

    def edit(content: dict[str, Any]) -> None:
        content["data"]["args"]["data_dir"] = where

    path = edited(Path(trained["metrics"]["best_checkpoint"]), tmp_path / "d.ckpt", edit)
    if not sealed:
        content = torch.load(path, weights_only=True)
        content.pop(module("checkpoints._integrity").CHECKSUM_KEY)
        content.pop(module("checkpoints._integrity").SEAL_KEY, None)
        torch.save(content, path)
    with pytest.raises(UserError, match=r"data\.data_dir") as refusal:
        Checkpoint.open(path).datamodule()
    assert "where this project reads or writes no data" in str(refusal.value) or (
        not sealed and "not sealed" in str(refusal.value)
    )


@pytest.mark.slow
def test_eval_writes_nothing_into_the_source_tree(trained: dict[str, Any], tmp_path: Path) -> None:
    def edit(content: dict[str, Any]) -> None:
        content["data"]["args"]["data_dir"] = f"src/{PACKAGE}/x"

    path = edited(Path(trained["metrics"]["best_checkpoint"]), tmp_path / "d.ckpt", edit)
    result = run_cli("eval", f"ckpt_path={path}", cwd=tmp_path)
    one_error_line(result, "the project's source tree")
    assert not (ROOT / "src" / PACKAGE / "x").exists()


def rng_edits() -> dict[str, Any]:
    def short_torch(c: dict[str, Any]) -> None:
        c["rng_states"]["torch"] = c["rng_states"]["torch"][:100]

    def float_numpy(c: dict[str, Any]) -> None:
        c["rng_states"]["numpy_keys"] = c["rng_states"]["numpy_keys"].double()

    def far_position(c: dict[str, Any]) -> None:
        c["rng_states"]["numpy_position"] = torch.tensor([10**6, 0])

    def missing_python(c: dict[str, Any]) -> None:
        del c["rng_states"]["python"]

    return {f.__name__: f for f in (short_torch, float_numpy, far_position, missing_python)}


def sampler_edits() -> dict[str, Any]:
    def edit_with(state: Any) -> Any:
        def edit(c: dict[str, Any]) -> None:
            c["DigitsDataModule"]["train_sampler"] = state

        return edit

    return {
        "negative_epoch_huge_skip": edit_with({"epoch": -3, "skip": 10**12}),
        "negative_skip": edit_with({"epoch": 0, "skip": -1}),
        "text_epoch": edit_with({"epoch": "x", "skip": 0}),
        "skip_past_the_epoch": edit_with({"epoch": 0, "skip": 10**6}),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "words"),
    [*((name, "random-number states") for name in rng_edits()),
     *((name, "sampler position") for name in sampler_edits())],
)  # fmt: skip
def test_a_resume_checks_every_stored_state(
    trained: dict[str, Any], tmp_path: Path, name: str, words: str
) -> None:
    edit = {**rng_edits(), **sampler_edits()}[name]
    last = Path(trained["run_dir"]) / "checkpoints" / "last.ckpt"
    path = edited(last, tmp_path / "s.ckpt", edit)
    result = run_cli("train", f"ckpt_path={path}", "trainer.max_epochs=5", cwd=tmp_path)
    line = one_error_line(result, words)
    assert "net" not in line.split("(")[0]  # not blamed on the net
