"""Training end to end: real Lightning runs on the real data, checked by their outputs."""

from pathlib import Path

import pytest
import torch

from support import QUICK, compose_config, module, run_cli

train = module("train")
evaluate = module("eval")


@pytest.mark.slow
def test_same_seed_gives_same_weights(tmp_path: Path) -> None:
    states = []
    for name in ("a", "b"):
        cfg = compose_config(tmp_path / name, [*QUICK, "trainer.max_epochs=1", "seed=0"])
        train.train(cfg)
        states.append(torch.load(tmp_path / name / "checkpoints" / "last.ckpt", weights_only=True))
    for key, tensor in states[0]["state_dict"].items():
        assert torch.equal(tensor, states[1]["state_dict"][key]), key


@pytest.mark.slow
def test_eval_of_missing_checkpoint_is_one_clear_line(tmp_path: Path) -> None:
    result = run_cli("eval", "ckpt_path=nowhere.ckpt", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: checkpoint 'nowhere.ckpt' does not exist" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert "hint:" not in result.stderr  # ckpt_path is a key, though its default is ???
    assert list(tmp_path.iterdir()) == []  # the refused run's directory is removed
