"""Every config file composes, and the objects it names can be built."""

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from support import CONFIG_DIR, compose_config, module

GROUPS = sorted(p.parent.name for p in CONFIG_DIR.glob("*/*.yaml") if p.parent.name != "hydra")


def options() -> list[str]:
    """Every ``group=option`` override, found recursively so no file is missed."""
    found = []
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        group = path.parent.relative_to(CONFIG_DIR).as_posix()
        if group in (".", "hydra"):
            continue
        found.append(f"{group}={path.stem}")
    return found


def test_every_group_has_options() -> None:
    expected = {"callbacks", "data", "debug", "experiment", "logger", "model", "paths", "trainer"}
    expected |= {"optimizer", "scheduler"}
    assert expected <= set(GROUPS)
    assert len(options()) >= 15


@pytest.mark.parametrize("override", options())
def test_option_composes_and_builds(override: str, tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [override])
    assert cfg.paths.output_dir == str(tmp_path)
    info = module("data").DigitsDataModule().info  # model configs are sized by the data
    if (cfg.model.get("task") or {}).get("_target_", "").endswith(".Regression"):
        info = module("data.info").DataInfo(input_shape=(10,), target_kind="value")
    model = module("models.build").build_model(
        cfg.model, info, optimizer=cfg.optimizer, scheduler=cfg.scheduler
    )
    assert sum(p.numel() for p in model.parameters()) > 1000
    datamodule = instantiate(cfg.data)  # paths are checked at setup, so no files are needed
    assert datamodule.hparams.seed == cfg.seed
    if cfg.trainer.accelerator == "gpu" and not torch.cuda.is_available():
        with pytest.raises(module("cli.errors").UserError, match="no CUDA device"):
            module("runtime.run").build_trainer(cfg, task=model.task)
        return
    trainer = module("runtime.run").build_trainer(cfg, task=model.task)
    configured = [c._target_.rsplit(".", 1)[1] for c in (cfg.get("callbacks") or {}).values() if c]
    built = {type(c).__name__ for c in trainer.callbacks}
    assert set(configured) <= built


def test_eval_config_composes(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["ckpt_path=some.ckpt"], config_name="eval")
    assert cfg.ckpt_path == "some.ckpt"
    assert cfg.task_name == "eval"


def test_seed_zero_reaches_the_data_module(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["seed=0"])
    assert cfg.data.seed == 0
    cfg = compose_config(tmp_path, ["seed=7"])
    assert cfg.data.seed == 7
