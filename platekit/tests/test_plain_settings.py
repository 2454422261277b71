"""No OmegaConf type reaches a checkpoint: list and dict settings are stored as plain Python.

Hydra hands a data module ``data.features=[a,b]`` as a ``ListConfig``; Lightning stores a
module's saved settings in every checkpoint as they are, and ``torch.load(weights_only=True)``
then refuses the file ("pickled global omegaconf.listconfig.ListConfig"): the run's test
stage, eval, export, predict and resume all failed.
"""

import typing
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from support import QUICK, compose_config, module

card = module("checkpoints._card")
PLAIN_TYPES = (str, int, float, bool, type(None), torch.Tensor)


def assert_plain(value: Any, where: str = "checkpoint") -> None:
    """Every value under ``value`` is a plain container, a scalar or a tensor."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str | int), f"{where}: key {key!r}"
            assert_plain(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            assert_plain(item, f"{where}[{i}]")
    else:
        assert isinstance(value, PLAIN_TYPES), f"{where} is a {type(value).__name__}"


def container_settings(cls: type) -> list[str]:
    """The ``__init__`` arguments of ``cls`` (and its bases) that take lists or dicts."""
    names = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for name, hint in typing.get_type_hints(init).items():
            text = str(hint)
            if any(kind in text for kind in ("Sequence", "list", "dict", "Mapping", "tuple")):
                names.append(name)
    return sorted(set(names) - {"return"})


def data_configs() -> list[str]:
    from platekit.testing import config_options

    return config_options("data")


@pytest.mark.parametrize("name", data_configs())
def test_every_list_and_dict_setting_of_every_data_module_is_saved_plain(
    name: str, tmp_path: Path
) -> None:
    data = compose_config(tmp_path, [f"data={name}"]).data
    cls = get_class(data._target_)
    given = OmegaConf.to_container(data, resolve=True)
    assert isinstance(given, dict)
    for setting in container_settings(cls):  # given as Hydra gives them: OmegaConf nodes
        given[setting] = ["first", "second"]
    node = OmegaConf.create(given)
    datamodule = instantiate(node, _convert_="none")  # lists stay ListConfig, as from the CLI
    assert_plain(dict(datamodule.hparams), f"{name} hparams")
    assert_plain(dict(datamodule.hparams_initial), f"{name} hparams_initial")
    saved = tmp_path / "settings.pt"
    torch.save({"datamodule_hyper_parameters": dict(datamodule.hparams)}, saved)
    loaded = torch.load(saved, weights_only=True)["datamodule_hyper_parameters"]
    for setting in container_settings(cls):
        assert loaded[setting] == ["first", "second"]


def test_a_checkpoint_of_any_module_holds_its_settings_as_plain_python(tmp_path: Path) -> None:
    # A plain LightningDataModule (not the contract's) saving a ListConfig, and a model
    # whose hparams Lightning kept as a DictConfig with its type: both made plain on save.
    checkpoint = {
        "hyper_parameters": OmegaConf.create({"net": {"sizes": [64, 32]}}),
        "hparams_type": type(OmegaConf.create({})),
        "datamodule_hyper_parameters": {"features": OmegaConf.create(["a", "b"]), "k": 3},
        "callbacks": {"Mine": {"watch": OmegaConf.create(["val/acc"]), "best": torch.ones(1)}},
    }
    card.plain_hyperparameters(checkpoint)
    assert_plain(checkpoint)
    path = tmp_path / "x.ckpt"
    torch.save(checkpoint, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["datamodule_hyper_parameters"] == {"features": ["a", "b"], "k": 3}
    assert loaded["hyper_parameters"] == {"net": {"sizes": [64, 32]}}
    assert loaded["callbacks"]["Mine"]["watch"] == ["val/acc"]


@pytest.mark.slow
def test_a_run_with_a_list_setting_tests_evaluates_exports_predicts_and_resumes(
    tmp_path: Path,
) -> None:
    settings = module("data").CsvDataModule.make_fixture(tmp_path)
    data = [f"data.{key}={value}" for key, value in settings.items()]
    overrides = [*QUICK, "data=csv", "model=mlp", "trainer.max_epochs=1", *data]
    overrides.append("data.features=[a,c]")  # the README's way to drop a column
    run_dir = tmp_path / "run"
    metrics = module("train").train(compose_config(run_dir, overrides))  # its test stage loads
    assert metrics["test"]["test/acc"] > 0
    checkpoints = sorted((run_dir / "checkpoints").glob("*.ckpt"))
    assert checkpoints
    for path in checkpoints:
        loaded = torch.load(path, weights_only=True)
        assert_plain(loaded, path.name)
        assert loaded["datamodule_hyper_parameters"]["features"] == ["a", "c"]
    best = metrics["best_checkpoint"]
    named = [f"+data.path={settings['path']}"]
    scores = module("eval").evaluate(
        compose_config(tmp_path / "eval", [f"ckpt_path={best}", *named], "eval")
    )
    assert scores["test"]["test/acc"] == pytest.approx(metrics["test"]["test/acc"])
    report = module("export").export(
        compose_config(tmp_path / "export", [f"ckpt_path={best}", "repeats=1", *named], "export")
    )
    assert report["data"]["feature_names"] == ["a", "a_missing", "c"]  # a has gaps: flagged
    given = [f"model_path={best}", f"inputs={settings['path']}"]
    rows = module("predict").predict(compose_config(tmp_path / "p", given, "predict"))
    assert len(rows) == 120
    last = run_dir / "checkpoints" / "last.ckpt"
    resuming = [*overrides, "trainer.max_epochs=2", f"ckpt_path={last}"]  # data named again
    resumed = module("train").train(compose_config(run_dir, resuming), resuming)
    assert resumed["epochs"] == 2
