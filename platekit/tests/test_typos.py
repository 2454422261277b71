"""A typo'd config key or group option gets Hydra's error plus the nearest valid names."""

from pathlib import Path

import pytest

from support import CONFIG_DIR, module, run_cli

typos = module("config._typos")


def test_nearest_key_and_option_are_named() -> None:
    found = typos.nearest_names(
        CONFIG_DIR, "train", ["trainer.max_epoch=3", "model=cnnn", "seed=1"]
    )
    assert len(found) == 2
    assert any("did you mean: cnn?" in line for line in found)
    assert any(
        line.startswith("no key 'trainer.max_epoch'; did you mean: trainer.max_epochs")
        for line in found
    )
    assert typos.nearest_names(CONFIG_DIR, "train", ["model=mlp", "model.net.hidden=[8]"]) == []


def test_keys_whose_value_must_be_set_are_not_typos() -> None:
    # ckpt_path: ??? in eval.yaml; a key with an unset value still exists.
    assert typos.nearest_names(CONFIG_DIR, "eval", ["ckpt_path=x.ckpt", "seed=1"]) == []
    assert typos.nearest_names(CONFIG_DIR, "predict", ["model_path=m.onnx", "inputs=x.npy"]) == []
    assert typos.nearest_names(CONFIG_DIR, "eval", ["ckpt_pth=x.ckpt"]) == [
        "no key 'ckpt_pth'; did you mean: ckpt_path?"
    ]


@pytest.mark.slow
def test_cli_typo_prints_hydra_error_and_hint(tmp_path: Path) -> None:
    result = run_cli("train", "trainer.max_epoch=3", cwd=tmp_path)
    assert result.returncode == 1
    assert "Could not override 'trainer.max_epoch'" in result.stderr
    assert "hint: no key 'trainer.max_epoch'; did you mean: trainer.max_epochs" in result.stderr
