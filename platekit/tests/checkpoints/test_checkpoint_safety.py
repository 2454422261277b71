"""Loading a checkpoint never runs code: every class it names goes through the registry.

Each slot a checkpoint fills (model class, net, a class nested in the net's arguments,
task, optimizer, schedule, data module and its arguments) is given names that would run
code or write a file if resolved the way Hydra resolves them (attribute walks behind an
allowed prefix, plain callables, Hydra's own keys, interpolations). Every one is refused,
nothing is imported for it and the marker file it aims at stays as it was.
"""

import builtins
import importlib
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from support import PACKAGE, compose_config, module, project_module, run_cli

UserError = module("_errors").UserError
Checkpoint = module("checkpoints._restore").Checkpoint
registry = module("_registry")
save_checkpoint = module("checkpoints._io").save_checkpoint

# Names that lead to code through an allowed prefix, or outside every prefix.
WALKS = [
    "platekit.commands._rundir.shutil.copyfile",
    "platekit.commands._sweep.subprocess.Popen",
    f"{PACKAGE}.data.digits.torch.save",  # through the project's own package
    "torch.nn.functional.torch.save",
    "torch.optim.optimizer.torch.save",
    "torch.nn.functional.torch.utils.collect_env.subprocess.Popen",
    "torch.nn.attention.torch.save",
    "shutil.copyfile",
    "builtins.open",
    "subprocess.run",
    "os.remove",
    "torch.save",
    "platekit._files.write_atomic",  # a function under a root, not a class
    f"{PACKAGE}.data.digits.read_digits",  # the same under the project's package
    "torch.nn.Module.__init__",
]


def arguments(marker: Path) -> dict[str, Any]:
    """What each hostile callable would need to leave a trace in ``marker``."""
    return {"args": ["touch", str(marker)], "src": __file__, "dst": str(marker)}


def with_name(content: dict[str, Any], slot: str, node: dict[str, Any]) -> None:
    """Put ``node`` (a ``_target_`` and its arguments) into ``slot`` of a checkpoint."""
    hparams = content["hyper_parameters"]
    if slot == "model":
        content["model"]["_target_"] = node["_target_"]
    elif slot == "net_argument":
        hparams["net"]["dropout"] = node
    elif slot == "data":
        content["data"]["_target_"] = node["_target_"]
    elif slot == "data_argument":
        content["data"]["args"]["normalize"] = node
    else:  # net, task, optimizer, scheduler
        hparams[slot] = node


ALLOWED = tuple(f"{root}." for root in registry.active().roots)  # modules a name may import
SLOTS = ["model", "net", "net_argument", "task", "optimizer", "scheduler", "data", "data_argument"]


def hostile(good: Path, folder: Path, slot: str, name: str, sealed: bool) -> tuple[Path, Path]:
    """A copy of ``good`` naming ``name`` in ``slot``; the marker file it would touch."""
    marker = folder / "marker"
    marker.write_text("untouched")
    content = torch.load(good, weights_only=True)
    with_name(content, slot, {"_target_": name, **arguments(marker)})
    path = folder / "hostile.ckpt"
    if sealed:
        save_checkpoint(content, path)  # the checksum matches: only the name is bad
    else:
        content.pop(module("checkpoints._integrity").CHECKSUM_KEY, None)
        torch.save(content, path)
    return path, marker


def open_and_build(path: Path) -> None:
    """Everything eval, export and predict do with a checkpoint before using it."""
    checkpoint = Checkpoint.open(path)
    checkpoint.model()
    checkpoint.datamodule()


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
@pytest.mark.parametrize("slot", SLOTS)
def test_every_slot_refuses_every_route_to_code(
    trained: dict[str, Any], tmp_path: Path, slot: str, sealed: bool
) -> None:
    good = Path(trained["metrics"]["best_checkpoint"])
    for index, name in enumerate(WALKS):
        folder = tmp_path / str(index)
        folder.mkdir()
        path, marker = hostile(good, folder, slot, name, sealed)
        imported = set(sys.modules)
        with pytest.raises(UserError, match=r"refused") as refusal:
            open_and_build(path)
        assert name in str(refusal.value) or name.rpartition(".")[0] in str(refusal.value)
        assert marker.read_text() == "untouched", name
        assert sorted(folder.iterdir()) == [path, marker], name  # nothing written
        new = {m for m in set(sys.modules) - imported if not m.startswith(ALLOWED)}
        assert not new, f"{name} imported {new}"


@pytest.mark.parametrize("key", ["_partial_", "_args_", "_recursive_", "_convert_"])
def test_hydra_keys_are_refused(trained: dict[str, Any], tmp_path: Path, key: str) -> None:
    content = torch.load(trained["metrics"]["best_checkpoint"], weights_only=True)
    content["hyper_parameters"]["net"][key] = ["x"] if key == "_args_" else True
    save_checkpoint(content, tmp_path / "keys.ckpt")
    with pytest.raises(UserError, match=rf"holds {key}, which is refused"):
        open_and_build(tmp_path / "keys.ckpt")


def test_strings_stay_literal(trained: dict[str, Any], tmp_path: Path) -> None:
    """An interpolation in a checkpoint is text: nothing reads the environment."""
    content = torch.load(trained["metrics"]["best_checkpoint"], weights_only=True)
    content["data"]["args"]["normalize"] = "${oc.env:HOME}"
    save_checkpoint(content, tmp_path / "interpolated.ckpt")
    with pytest.raises(UserError) as refusal:
        open_and_build(tmp_path / "interpolated.ckpt")
    assert "${oc.env:HOME}" in str(refusal.value)
    assert os.environ["HOME"] not in str(refusal.value).replace("${oc.env:HOME}", "")


def test_a_resumed_run_keeps_a_checkpoints_strings_literal(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    content = torch.load(trained["metrics"]["best_checkpoint"], weights_only=True)
    content["data"]["args"]["normalize"] = "${oc.env:HOME}"
    save_checkpoint(content, tmp_path / "interpolated.ckpt")
    cfg = compose_config(tmp_path / "run", [f"ckpt_path={tmp_path / 'interpolated.ckpt'}"])
    with pytest.raises(UserError) as refusal:
        module("train").train(cfg, overrides=[])
    assert os.environ["HOME"] not in str(refusal.value).replace("${oc.env:HOME}", "")


def test_the_registry_accepts_the_shipped_names_and_stores_short_keys() -> None:
    names = {
        f"{PACKAGE}.models.SmallCNN": "net",
        f"{PACKAGE}.models.nets.MLP": "net",  # module.qualname, as older checkpoints hold
        "platekit.models.TaskModule": "model",
        "platekit.models.Regression": "task",
        "platekit.models.Cosine": "scheduler",
        f"{PACKAGE}.models.TaskModule": "model",  # where it was before the split: moved
        # What platekit 0.1 and 0.2 checkpoints hold: their module paths, private since 0.3
        "platekit.models.schedules.Cosine": "scheduler",
        "platekit.models.tasks.Classification": "task",
        "platekit.models.task_module.TaskModule": "model",
        "platekit.data.csv.CsvDataModule": "data",
        # What checkpoints written before the split hold (module.qualname, or the short key):
        f"{PACKAGE}.models.task_module.TaskModule": "model",
        f"{PACKAGE}.TaskModule": "model",
        f"{PACKAGE}.models.tasks.Classification": "task",
        f"{PACKAGE}.models.schedules.Cosine": "scheduler",
        f"{PACKAGE}.data.csv.CsvDataModule": "data",
        f"{PACKAGE}.data.DigitsDataModule": "data",
        "torch.optim.AdamW": "optimizer",
        "torch.nn.GELU": "part",
    }
    active = registry.active()
    for name, slot in names.items():
        cls = active.resolve(name, slot)
        assert active.resolve(active.key(cls), slot) is cls
    assert active.key(active.resolve(f"{PACKAGE}.models.SmallCNN", "net")) == f"{PACKAGE}.SmallCNN"
    with pytest.raises(UserError, match="not a Optimizer class"):
        active.resolve("torch.nn.Linear", "optimizer")  # a real class, in the wrong slot
    # A config Hydra builds itself (a callback, a logger) must be edited: one line says how.
    moved = r"platekit 0\.4 moved: write 'platekit\.training\.ExactResume' in the config"
    with pytest.raises(UserError, match=moved):
        active.resolve("platekit.callbacks.exact_resume.ExactResume", "callback")
    with pytest.raises(UserError, match="refused"):  # a private module is no way in
        active.resolve("platekit.models._schedules.Cosine", "scheduler")


def test_a_teams_own_class_registers_itself_and_a_third_party_one_is_trusted_by_name(
    tmp_path: Path,
) -> None:
    source = Path(project_module("models").__file__).parent / "my_net_for_the_test.py"
    source.write_text("from torch import nn\n\n\nclass MyNet(nn.Linear):\n    pass\n")
    try:
        cls = registry.active().resolve(f"{PACKAGE}.models.MyNet", "net")
        assert cls.__module__ == f"{PACKAGE}.models.my_net_for_the_test"
    finally:
        source.unlink()
    with pytest.raises(UserError, match="trusted_classes"):
        registry.active().resolve("plain_datamodule.PlainBlobs", "data")
    trusting = registry.trust(["plain_datamodule.PlainBlobs"])
    try:
        assert trusting.resolve("plain_datamodule.PlainBlobs", "data").__name__ == "PlainBlobs"
        with pytest.raises(UserError, match="not an exact class name"):
            registry.trust(["plain_datamodule."])  # a prefix is not a class
    finally:
        registry.trust([])


DANGERS: dict[int, str] = {
    id(thing): label
    for label, thing in {
        "subprocess": subprocess,
        "os": os,
        "shutil": shutil,
        "pickle": pickle,
        "importlib": importlib,
        "builtins": builtins,
        "builtins.open": builtins.open,
        "torch.save": torch.save,
        "torch.load": torch.load,
        "os.system": os.system,
        "subprocess.Popen": subprocess.Popen,
    }.items()
}


def modules_under(roots: tuple[str, ...]) -> list[ModuleType]:
    return [
        m
        for name, m in list(sys.modules.items())
        if isinstance(m, ModuleType) and any(name == r or name.startswith(r + ".") for r in roots)
    ]


def routes_to_danger(depth: int = 3) -> Iterator[str]:
    """Every ``module.a.b.c`` (up to ``depth`` attributes) under the roots reaching a danger."""
    for start in modules_under(registry.active().roots):
        frontier: list[tuple[str, Any]] = [(start.__name__, start)]
        for _ in range(depth):
            following = []
            for path, node in frontier:
                for attribute, value in list(vars(node).items()):
                    route = f"{path}.{attribute}"
                    if id(value) in DANGERS:
                        yield route
                        if isinstance(value, ModuleType):  # and one step into it
                            yield f"{route}.{'system' if value is os else 'Popen'}"
                    elif isinstance(value, ModuleType) and not attribute.startswith("__"):
                        following.append((route, value))
            frontier = following


def test_no_route_to_code_under_the_allowed_roots_resolves() -> None:
    for name in (
        "models._task_module",
        "data._csv",
        "commands._sweep",
        "commands._rundir",
    ):
        module(name)  # the package's modules, imported as a run imports them
    routes = sorted(set(routes_to_danger()))
    assert len(routes) > 100  # the walk found the routes an attacker would
    active = registry.active()
    for route in routes:
        for slot in registry.SLOT_BASES:
            with pytest.raises(UserError, match="refused"):
                active.resolve(route, slot)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["train", "train_init", "eval", "export", "predict"])
def test_each_command_refuses_a_hostile_checkpoint_in_one_line(
    trained: dict[str, Any], tmp_path: Path, entry: str
) -> None:
    good = Path(trained["metrics"]["best_checkpoint"])
    path, marker = hostile(good, tmp_path, "net", "platekit.commands._rundir.shutil.copyfile", True)
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 8, 8), np.float32))
    overrides = {
        "train": [f"ckpt_path={path}", "trainer.max_epochs=1", "callbacks.progress_bar=null"],
        "train_init": [f"init_from={path}", "trainer.max_epochs=1", "callbacks.progress_bar=null"],
        "eval": [f"ckpt_path={path}"],
        "export": [f"ckpt_path={path}"],
        "predict": [f"model_path={path}", f"inputs={tmp_path / 'x.npy'}"],
    }[entry]
    result = run_cli(entry.removesuffix("_init"), *overrides, cwd=tmp_path)
    assert marker.read_text() == "untouched"
    if entry == "train_init":  # only the weights are read: the names are never used
        assert result.returncode == 0, result.stderr[-2000:]
        return
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if "error:" in line]
    assert len(errors) == 1, output[-2000:]
    assert "refused" in errors[0]
    assert "Traceback" not in result.stdout + result.stderr
