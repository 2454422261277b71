"""Every config composes and builds; each model config builds for every data config whose
inputs it takes, and refuses the others in one clear line before any training."""

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from platekit import UserError
from platekit.models import build_model
from platekit.testing import build_datamodule, compose_config, config_options, data_fixture
from platekit.training import build_trainer

from conftest import ROOT

CONFIG_DIR = ROOT / "configs"


def options() -> list[str]:
    """Every ``group=option`` override, found recursively so no file is missed."""
    found = []
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        group = path.parent.relative_to(CONFIG_DIR).as_posix()
        if group not in (".", "hydra"):
            found.append(f"{group}={path.stem}")
    return found


def test_every_group_has_options() -> None:
    groups = {p.parent.name for p in CONFIG_DIR.glob("*/*.yaml")}
    expected = {"callbacks", "data", "debug", "experiment", "logger", "model", "paths", "trainer"}
    assert expected | {"optimizer", "scheduler"} <= groups
    assert len(options()) >= 15


@pytest.mark.parametrize("override", options())
def test_option_composes_and_builds(override: str, data_infos: dict, tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [override])
    assert cfg.paths.output_dir == str(tmp_path)
    datamodule = instantiate(cfg.data)  # paths are checked at setup, so no files are needed
    assert datamodule.hparams.seed == cfg.seed
    [task, *_] = [model.task for model in builds(cfg, data_infos).values()]
    if cfg.trainer.accelerator == "gpu" and not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA device"):
            build_trainer(cfg, task=task)
        return
    trainer = build_trainer(cfg, task=task)
    configured = [c._target_.rsplit(".", 1)[1] for c in (cfg.get("callbacks") or {}).values() if c]
    assert set(configured) <= {type(c).__name__ for c in trainer.callbacks}


def builds(cfg: DictConfig, data_infos: dict) -> dict:
    """The config's model built for each data config whose inputs and targets it takes."""
    models, refusals = {}, []
    for name, info in data_infos.items():
        try:
            models[name] = build_model(
                cfg.model, info, optimizer=cfg.optimizer, scheduler=cfg.scheduler
            )
        except UserError as refusal:  # the net cannot take these inputs or targets
            refusals.append(str(refusal))
    assert all("\n" not in refusal and "model." in refusal for refusal in refusals), refusals
    return models


@pytest.fixture(scope="module")
def data_infos(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Each data config's metadata, from the small data set its module writes."""
    infos = {}
    for name in config_options("data"):
        root = tmp_path_factory.mktemp(f"data_{name}")
        overrides = data_fixture(name, root)
        if overrides is not None:
            infos[name] = build_datamodule(root, overrides).info
    return infos


@pytest.mark.parametrize("model", config_options("model"))
def test_model_config_builds_for_the_data_it_takes(
    model: str, data_infos: dict, tmp_path: Path
) -> None:
    built = builds(compose_config(tmp_path, [f"model={model}"]), data_infos)
    assert built, f"model={model} builds for none of the data configs {sorted(data_infos)}"
    for name, net in built.items():
        info = data_infos[name]
        assert sum(p.numel() for p in net.parameters()) > 100
        with torch.no_grad():  # sized by the data: its inputs in, one output per class/value
            outputs = net.eval()(torch.zeros(2, *info.input_shape))
        assert tuple(outputs.shape) == (2, info.num_outputs)
        expected = "Regression" if info.target_kind == "value" else "Classification"
        assert type(net.task).__name__ == expected


def test_every_data_config_is_taken_by_some_model(data_infos: dict, tmp_path: Path) -> None:
    takers = {name: [] for name in data_infos}
    for model in config_options("model"):
        for name in builds(compose_config(tmp_path, [f"model={model}"]), data_infos):
            takers[name].append(model)
    assert len(takers) == len(config_options("data"))  # every module writes a fixture
    assert all(takers.values()), takers


def test_eval_config_composes(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["ckpt_path=some.ckpt"], config_name="eval")
    assert (cfg.ckpt_path, cfg.task_name) == ("some.ckpt", "eval")


def test_seed_reaches_the_data_module(tmp_path: Path) -> None:
    for seed in (0, 7):
        assert compose_config(tmp_path, [f"seed={seed}"]).data.seed == seed


@pytest.mark.parametrize("name", config_options("data"))
def test_a_data_config_alone_picks_a_net_that_takes_its_inputs(
    name: str, data_infos: dict, tmp_path: Path
) -> None:
    cfg = compose_config(tmp_path, [f"data={name}"])  # no model=: the data config's default
    info = data_infos[name]
    try:
        net = build_model(cfg.model, info, optimizer=cfg.optimizer, scheduler=cfg.scheduler)
    except UserError as refusal:
        pytest.fail(
            f"data={name} alone: {refusal}; name the net that fits it in configs/data/"
            f"{name}.yaml's defaults, e.g. `- override /model@_global_.model: mlp`"
        )
    with torch.no_grad():
        outputs = net.eval()(torch.zeros(2, *info.input_shape))
    assert tuple(outputs.shape) == (2, info.num_outputs)


def test_a_model_given_wins_over_the_data_configs_default(data_infos: dict, tmp_path: Path) -> None:
    assert compose_config(tmp_path, ["data=csv"]).model.net._target_.endswith(".MLP")
    cfg = compose_config(tmp_path, ["data=csv", "model=cnn"])
    assert cfg.model.net._target_.endswith(".SmallCNN")
    with pytest.raises(UserError, match=r"SmallCNN cannot take the data's inputs of shape"):
        build_model(cfg.model, data_infos["csv"], optimizer=cfg.optimizer, scheduler=cfg.scheduler)
