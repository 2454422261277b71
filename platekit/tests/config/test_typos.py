"""A typo'd config key or group option gets Hydra's error plus the nearest valid names."""

from pathlib import Path

import pytest

from support import CONFIG_DIR, cli_env, module, run_cli, run_project_cli

typos = module("config._typos")
precheck = module("config._check")


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
def test_cli_typo_is_one_line_naming_the_nearest_keys(tmp_path: Path) -> None:
    for typo, line in (
        (
            "trainer.max_epoch=3",
            "error: no key 'trainer.max_epoch'; did you mean: trainer.max_epochs, ",
        ),
        ("model=cnnn", "error: no option 'cnnn' of group 'model'; did you mean: cnn?"),
    ):
        result = run_cli("train", typo, cwd=tmp_path)
        assert result.returncode == 1
        (printed,) = result.stdout.splitlines()
        assert printed.startswith(line), printed
        assert result.stderr == ""  # not Hydra's own several lines
        assert list(tmp_path.iterdir()) == []


# Mistakes Hydra meets while composing, each one line on stdout, nothing left behind.
COMPOSITION_MISTAKES = [
    # a key under a node this command does not have (export has no model)
    (["export", "ckpt_path=x.ckpt", "model.net.widht=8"], "no key 'model.net.widht' in "),
    # a malformed override: Hydra's own words, not a missing key
    (["train", "a=[1,"], "no viable alternative at input '[1,'"),
    # a multirun's swept key, option and component setting, before its folder is made
    (["train", "-m", "seed=0,1", "trainer.max_epoch=1,2"], "did you mean: trainer.max_epochs"),
    (["train", "-m", "model=cnn,mpl"], "no option 'mpl' of group 'model'; did you mean: mlp?"),
    (["train", "-m", "data.normalise=true,false"], "did you mean: data.normalize"),
    (
        ["train", "-m", "data.skip_bad_files=true,false"],
        "a multirun sweeps it as an addition: +data.skip_bad_files=true,false",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "line"), COMPOSITION_MISTAKES)
def test_a_composition_mistake_is_one_line_and_leaves_nothing(
    command: list[str], line: str, tmp_path: Path
) -> None:
    result = run_cli(*command, cwd=tmp_path)
    assert result.returncode == 1
    (printed,) = result.stdout.splitlines()
    assert printed.startswith("error: "), printed
    assert line in printed, printed
    assert result.stderr == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_users_hydra_full_error_keeps_additions_and_gets_the_traceback(tmp_path: Path) -> None:
    env = cli_env(HYDRA_FULL_ERROR="1")
    # a setting the data module declares but its YAML leaves out: still taken without `+`
    shown = run_project_cli(
        "train", "data.skip_bad_files=true", "--cfg", "job", cwd=tmp_path, env=env
    )
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert "  skip_bad_files: true" in shown.stdout
    typo = run_project_cli("train", "trainer.max_epoch=1", cwd=tmp_path, env=env)
    assert typo.returncode == 1
    assert "ConfigCompositionException" in typo.stderr  # asked for: Hydra's full error


# A typo and a value its intended key takes; its hint's every name must then be accepted.
TYPOS = [
    ("trainer.max_epoch", "3"),
    ("optimizer.l", "0.01"),
    ("model.net.hiden", "[8]"),
    ("data.batch_sise", "32"),
    ("callbacks.early_stoping.patience", "3"),
    ("modl", "mlp"),
    ("sweep.params.optimizer.lrr", "'interval(0.001, 0.1)'"),
    ("sweep.param", "{}"),
]


@pytest.mark.parametrize(("typo", "value"), TYPOS)
def test_every_name_a_hint_suggests_is_then_accepted(typo: str, value: str) -> None:
    """Each suggested name, typed with the same value, composes and names a known key (a
    value its rule refuses may be a problem, an unknown key may not)."""
    search = ["hparams_search=optuna"] if typo.startswith("sweep.") else []
    (hint,) = typos.nearest_names(CONFIG_DIR, "train", [*search, f"{typo}={value}"])
    names = hint.split("did you mean: ", 1)[1].removesuffix("?").split(", ")
    assert names, hint
    for name in names:
        override = [*search, f"{name}={value}"]
        planned = precheck.check(CONFIG_DIR, "train", override)  # Hydra refusing it raises
        assert typos.nearest_names(CONFIG_DIR, "train", planned.command_line(override)) == []
        assert not [line for line in planned.problems if "is not a setting" in line], name
