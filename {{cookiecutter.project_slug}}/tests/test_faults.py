"""Bad checkpoints, unsafe payloads, non-finite losses: one clear error, nothing overwritten."""

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from support import QUICK, compose_config, module, run_cli

train = module("train")
evaluate = module("eval")
checkpoints = module("checkpoints.io")
UserError = module("cli.errors").UserError


class Payload:
    """Unpickling this runs code: a checkpoint carrying it must be refused."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned",))


def bad_checkpoint(kind: str, good: Path, folder: Path) -> tuple[Path, str]:
    """A broken checkpoint of ``kind`` and the words its error must contain."""
    path = folder / f"{kind}.ckpt"
    if kind == "truncated":
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path, "is not a readable PyTorch checkpoint"
    if kind == "random":
        path.write_bytes(os.urandom(4096))
        return path, "is not a readable PyTorch checkpoint"
    if kind == "pickled_code":
        torch.save({"state_dict": {}, "payload": Payload()}, path)
        return path, "refused for safety"
    if kind == "other_architecture":
        checkpoint = torch.load(good, weights_only=True)
        checkpoint["state_dict"] = {"net.layers.0.weight": torch.zeros(3, 3)}
        torch.save(checkpoint, path)
        return path, "does not fit this model's architecture"
    return folder / "missing.ckpt", "does not exist"


KINDS = ["truncated", "random", "pickled_code", "other_architecture", "missing"]


@pytest.mark.parametrize("kind", KINDS)
def test_train_refuses_a_bad_checkpoint_before_writing(
    kind: str, trained: dict[str, Any], tmp_path: Path
) -> None:
    path, reason = bad_checkpoint(kind, trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path)
    before = path.read_bytes() if path.exists() else None
    run_dir = tmp_path / "run"
    for setting in ("ckpt_path", "init_from"):
        with pytest.raises(UserError, match=f"checkpoint '{path}' .*{reason}"):
            train.train(compose_config(run_dir, [*QUICK, f"{setting}={path}"]))
    assert not run_dir.exists()  # nothing written
    assert (path.read_bytes() if path.exists() else None) == before


@pytest.mark.parametrize("kind", ["truncated", "random", "pickled_code", "missing"])
def test_eval_refuses_a_bad_checkpoint(kind: str, trained: dict[str, Any], tmp_path: Path) -> None:
    path, reason = bad_checkpoint(kind, trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path)
    cfg = compose_config(tmp_path / "run", [f"ckpt_path={path}"], "eval")
    with pytest.raises(UserError, match=f"checkpoint '{path}' .*{reason}"):
        evaluate.evaluate(cfg)
    assert not (tmp_path / "run").exists()


def test_pickled_code_is_never_run(trained: dict[str, Any], tmp_path: Path) -> None:
    path, _ = bad_checkpoint("pickled_code", trained["run_dir"] / "last.ckpt", tmp_path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)  # what load_checkpoint relies on


def test_init_from_strict_and_not(trained: dict[str, Any], tmp_path: Path) -> None:
    model = module("runtime.run").build_parts(compose_config(tmp_path, ["model=mlp"]))[1]
    cnn_checkpoint = checkpoints.load_checkpoint(trained["run_dir"] / "checkpoints" / "last.ckpt")
    with pytest.raises(UserError, match=r"missing: net.*unexpected: net.*init_strict=false"):
        checkpoints.load_weights(model, cnn_checkpoint, "cnn.ckpt")
    unfit = checkpoints.load_weights(model, cnn_checkpoint, "cnn.ckpt", strict=False)
    assert unfit["missing"]
    assert unfit["unexpected"]
    same = module("runtime.run").build_parts(compose_config(tmp_path, []))[1]
    assert checkpoints.load_weights(same, cnn_checkpoint, "cnn.ckpt") == {
        "missing": [],
        "unexpected": [],
        "mismatched": [],
    }
    for key, tensor in cnn_checkpoint["state_dict"].items():
        assert torch.equal(same.state_dict()[key], tensor)


def test_init_from_not_strict_trains_and_lists_the_keys_left_out(
    trained: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cnn = trained["run_dir"] / "checkpoints" / "last.ckpt"
    overrides = ["model=mlp", "debug=fast_dev_run", "callbacks.progress_bar=null"]
    cfg = compose_config(tmp_path, [*overrides, f"init_from={cnn}", "init_strict=false"])
    assert train.train(cfg)["steps"] == 1
    assert "init_from: 6 missing keys left as initialised: ['net.layers" in caplog.text
    assert "unexpected keys left as initialised: ['net." in caplog.text


def test_non_finite_loss_stops_with_step_batch_and_hint(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        [*QUICK, "model.optimizer.lr=1e30", "trainer.max_epochs=1"],
    )
    with pytest.raises(
        UserError,
        match=r"training loss is (nan|inf) at step \d+ \(epoch 0, batch \d+\); lower model\.",
    ):
        train.train(cfg)


def test_sampler_resume_state_after_a_whole_epoch_starts_the_next() -> None:
    sampler = module("data.sampling").EpochBatchSampler(100, 16, shuffle=True, seed=0)
    sampler.load_state_dict({"epoch": 2, "skip": len(sampler)})
    assert sampler.state_dict() == {"epoch": 3, "skip": 0}
    sampler.mark_consumed(3)
    assert sampler.state_dict() == {"epoch": 3, "skip": 3}
    sampler.set_epoch(4)
    assert sampler.state_dict() == {"epoch": 4, "skip": 0}


def test_rng_states_round_trip_as_tensors(tmp_path: Path) -> None:
    import random

    import numpy as np

    rng = module("checkpoints.rng")
    state = rng.capture_rng()
    torch.save(state, tmp_path / "rng.pt")
    first = (torch.rand(3), np.random.rand(3), random.random())
    rng.restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(first[0], again[0])
    assert (first[1] == again[1]).all()
    assert first[2] == again[2]


def test_ckpt_path_last_picks_the_newest_and_its_run_dir(tmp_path: Path) -> None:
    resume = module("checkpoints.resume")
    runs = tmp_path / "outputs" / "train" / "runs"
    for name in ("a", "b"):
        (runs / name / "checkpoints").mkdir(parents=True)
        torch.save({"state_dict": {}}, runs / name / "checkpoints" / "last.ckpt")
    os.utime(runs / "a" / "checkpoints" / "last.ckpt", (1, 1))
    assert resume.find_last_checkpoint(runs) == runs / "b" / "checkpoints" / "last.ckpt"
    assert resume.run_dir("last", str(runs / "new")) == str(runs / "b")
    assert resume.run_dir(None, str(runs / "new")) == str(runs / "new")
    assert resume.run_dir(str(runs / "a/checkpoints/last.ckpt"), "new") == str(runs / "a")
    (runs / "a" / "checkpoints" / "cut.ckpt").write_bytes(b"PK")  # truncated: a fresh run
    assert resume.run_dir(str(runs / "a/checkpoints/cut.ckpt"), "new") == "new"
    with pytest.raises(UserError, match="ckpt_path=last found no"):
        resume.resume_path(
            compose_config(tmp_path, ["ckpt_path=last", f"paths.log_dir={tmp_path}"])
        )


@pytest.mark.slow
def test_cli_bad_checkpoint_is_one_line_without_traceback(
    trained: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, reason = bad_checkpoint(
        "truncated", trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path
    )
    result = run_cli("train", f"ckpt_path={path}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: checkpoint '{path}' {reason}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    monkeypatch.setenv("TRACEBACK", "1")  # the debug flag
    result = run_cli("train", f"ckpt_path={path}", cwd=tmp_path)
    assert "Traceback" in result.stderr
