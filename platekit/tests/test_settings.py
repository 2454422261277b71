"""A component's settings are its ``__init__`` parameters: a team adds one to its own data
module and the config checks know it, with no rule table to edit; a typo or a wrong type is
refused in one line before any run directory exists."""

import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException

from platekit._project import Project, use
from platekit._project import current as platekit_current
from platekit.config import _check as precheck
from platekit.config import _schema as schema
from platekit.config import _typos as typos
from platekit.config._rules import typed
from platekit.data._base import BaseDataModule
from platekit.data._image_folder import ImageFolderDataModule
from platekit.settings import Range, settings_of
from platekit.training import _hints as hints

from support import copy_project, run_python

PACKAGE = "settings_probe"  # a name no other test's bake uses: one package per process

# The team's new setting: a subclass of the digits module, a typed parameter with a default.
NOISY = '''"""Digits with a noise level: the team's own setting."""

from typing import Annotated, Any

from platekit.settings import Range

from .digits import DigitsDataModule


class DigitsNoise(DigitsDataModule):
    def __init__(
        self, noise: Annotated[float, Range(low=0, example=0.1)] = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
'''
NOISY_YAML = f"""defaults:
  - digits
  - _self_

_target_: {PACKAGE}.data.noisy.DigitsNoise
noise: 0.0
"""
TYPO = (
    "data.nosie is not a setting of DigitsNoise (nearest: noise, normalize); fix the key, or "
    "add the parameter to DigitsNoise.__init__"
)
# The same class, its YAML without the new key: the parameter alone declares it.
BARE_YAML = NOISY_YAML.replace("noise: 0.0\n", "")


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A baked project with the team's ``DigitsNoise``; its package imported."""
    root = copy_project(tmp_path_factory.mktemp("settings_bake"), PACKAGE)
    (root / "src" / PACKAGE / "data" / "noisy.py").write_text(NOISY)
    (root / "configs" / "data" / "noisy.yaml").write_text(NOISY_YAML)
    (root / "configs" / "data" / "noisy_bare.yaml").write_text(BARE_YAML)
    before = os.environ.get("CONFIG_DIR")
    os.environ["CONFIG_DIR"] = str(root / "configs")
    sys.path.insert(0, str(root / "src"))
    suite_project = platekit_current()  # importing the probe makes it current: put back
    try:
        importlib.import_module(f"{PACKAGE}.train")  # registers the run_dir resolver too
    finally:
        use(suite_project)
        if before is None:
            os.environ.pop("CONFIG_DIR")
        else:
            os.environ["CONFIG_DIR"] = before
    yield root
    sys.path.remove(str(root / "src"))


@pytest.fixture(autouse=True)
def current(project: Path) -> Iterator[ModuleType]:
    """This bake is the process's project (the registry finds its classes), for one test."""
    try:
        before: Project | None = platekit_current()
    except RuntimeError:  # none set yet
        before = None
    package = importlib.import_module(PACKAGE)
    use(package.PROJECT)
    yield package
    if before is not None:
        use(before)


def problems(
    project: Path, overrides: list[str], config_name: str = "train", **kw: Any
) -> list[str]:
    return precheck.check(project / "configs", config_name, overrides, **kw).problems


# ---- the team's new setting ------------------------------------------------------------


def test_a_new_setting_needs_no_rule(project: Path) -> None:
    assert problems(project, ["data=noisy"]) == []
    assert problems(project, ["data=noisy", "data.noise=0.3"]) == []


def test_a_typo_in_a_setting_is_one_line_naming_the_nearest(project: Path) -> None:
    assert problems(project, ["data=noisy", "data.nosie=0.1"]) == [TYPO]
    # A key added with + or written in a YAML file is checked the same way.
    (line,) = problems(project, ["data=noisy", "+data.noize=1"])
    assert line.startswith("data.noize is not a setting of DigitsNoise (nearest: noise")


def test_a_wrong_type_or_range_is_one_line(project: Path) -> None:
    assert problems(project, ["data=noisy", "data.noise=abc"]) == [
        "data.noise=abc: must be a finite number >= 0 (e.g. data.noise=0.1)"
    ]
    assert problems(project, ["data=noisy", "data.noise=-1"]) == [
        "data.noise=-1: must be a finite number >= 0 (e.g. data.noise=0.1)"
    ]
    # The parent's settings, reached through **kwargs, keep their types and ranges.
    assert problems(project, ["data=noisy", "data.batch_size=0", "data.num_workers=x"]) == [
        "data.batch_size=0: must be an integer >= 1 (e.g. data.batch_size=64)",
        "data.num_workers=x: must be an integer >= 0 (e.g. data.num_workers=0)",
    ]


def test_a_declared_setting_its_yaml_leaves_out_is_taken(project: Path) -> None:
    planned = precheck.check(project / "configs", "train", ["data=noisy_bare", "data.noise=0.2"])
    assert planned.problems == []
    assert planned.additions == ("data.noise=0.2",)
    argv = ["data=noisy_bare", "data.noise=0.2"]
    assert planned.command_line(argv) == ["data=noisy_bare", "+data.noise=0.2"]
    assert problems(project, ["data=noisy_bare", "data.noise=abc"]) == [
        "data.noise=abc: must be a finite number >= 0 (e.g. data.noise=0.1)"
    ]


def test_cli_refuses_a_typo_and_a_wrong_type_before_any_run_directory(project: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    env.pop("CONFIG_DIR", None)
    result = run_python(["-m", f"{PACKAGE}.train", "data=noisy", "data.nosie=0.1"], project, env)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "error: config has 1 problem:",
        f"  {TYPO}",
    ]
    assert "Traceback" not in result.stdout + result.stderr
    assert "hint:" not in result.stderr
    assert not (project / "outputs").exists()


# ---- what a component declares -----------------------------------------------------------


def test_settings_follow_kwargs_to_the_parents(current: ModuleType) -> None:
    noisy = importlib.import_module(f"{PACKAGE}.data.noisy").DigitsNoise
    settings = settings_of(noisy)
    assert list(settings.named) == [
        "noise",
        "batch_size",
        "eval_batch_size",
        "val_fraction",
        "test_fraction",
        "seed",
        "num_workers",
        "normalize",
        "skip_bad_files",
    ]
    assert settings.named["batch_size"].owner is BaseDataModule
    assert not settings.open
    # A subclass that re-declares a parameter (another default) keeps the parent's range.
    rule = schema.setting_rule(ImageFolderDataModule, "num_workers")
    assert rule is not None
    assert (rule.need, rule.example) == ("an integer >= 0", "2")


class Closed:
    def __init__(self, width: int = 1) -> None:
        self.width = width


class Forwards(Closed):
    def __init__(self, depth: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)


class UsesItsKwargs:
    def __init__(self, **options: Any) -> None:
        self.options = options


def test_kwargs_end_where_an_init_takes_none() -> None:
    assert list(settings_of(Forwards).named) == ["depth", "width"]
    assert not settings_of(Forwards).open
    assert "anything" in settings_of(UsesItsKwargs)  # **kwargs that reach object are used


@pytest.mark.parametrize(
    ("annotation", "default", "good", "bad", "need"),
    [
        (int, 3, [0, -2], [1.5, True, "3"], "an integer"),
        (float, 0.5, [1, 0.25], [float("nan"), "x", False], "a finite number"),
        (bool, True, [False], [0, "true"], "true or false"),
        (str, "a", ["b", ""], [1, None], "a string"),
        (Path, None, ["some/where"], [3], "a non-empty string"),
        (Literal["a", "b"], "a", ["b"], ["c", 1], "one of a, b"),
        (int | None, None, [None, 4], ["x"], "null or an integer"),
        (Sequence[int], (1, 2), [[], [3]], [[1.5], 3], "a list, each an integer"),
        (tuple[int, float], (1, 2.0), [[1, 2]], [[1], [1.5, 2]], "a list of 2: an integer,"),
        (Annotated[int, Range(1, 10)], 5, [1, 10], [0, 11], "an integer from 1 to 10"),
        (Annotated[float, Range(above=0, below=1)], 0.5, [0.1], [0, 1], "a finite number > 0"),
        (dict[str, Any], None, [{}], [[]], "a mapping"),
    ],
)
def test_annotations_become_rules(
    annotation: Any, default: Any, good: list[Any], bad: list[Any], need: str
) -> None:
    rule = typed(annotation, default)
    assert rule is not None
    assert rule.need.startswith(need)
    assert all(rule.ok(value) for value in good)
    assert not any(rule.ok(value) for value in bad)
    example = OverridesParser.create().parse_override(f"key={rule.example}").value()
    assert rule.ok(example)  # as a command line gives it


def test_what_a_config_cannot_hold_is_unchecked() -> None:
    assert typed(Any) is None
    assert typed(BaseDataModule) is None
    rule = typed(float | BaseDataModule)  # a tensor or module member: the config's half
    assert rule is not None
    assert rule.need == "a finite number"


# ---- the run's own keys, and what stays Hydra's --------------------------------------------


def test_run_keys_and_library_classes_keep_their_messages(project: Path) -> None:
    found = problems(project, ["seed=-1", "trainer.max_epochs=abc", "optimizer.lr=nan"])
    assert found == [
        "seed=-1: must be an integer from 0 to 4294967295 (e.g. seed=0)",
        "optimizer.lr=nan: must be a finite number > 0 (e.g. optimizer.lr=0.003)",
        "trainer.max_epochs=abc: must be null or an integer >= -1 (e.g. trainer.max_epochs=15)",
    ]
    assert problems(project, ["model.net.dropout=1"]) == [
        "model.net.dropout=1: must be a finite number >= 0 and < 1 (e.g. model.net.dropout=0.1)"
    ]


def option_rounds(project: Path) -> list[list[str]]:
    """Every ``group=option`` of configs/, as few command lines as take each one once."""
    groups: dict[str, list[str]] = {}
    configs = project / "configs"
    for path in sorted(configs.rglob("*/*.yaml")):
        group = path.parent.relative_to(configs).as_posix()
        if group != "hydra":
            groups.setdefault(group, []).append(f"{group}={path.stem}")
    depth = max(len(options) for options in groups.values())
    return [[opts[i] for opts in groups.values() if i < len(opts)] for i in range(depth)]


def test_every_shipped_option_and_command_meets_the_schema(project: Path) -> None:
    for overrides in option_rounds(project):
        assert problems(project, overrides) == [], overrides
    for name, overrides in [
        ("eval", ["ckpt_path=x.ckpt"]),
        ("export", ["ckpt_path=x.ckpt"]),
        ("predict", ["model_path=x.onnx", "inputs=x.npy"]),
        ("bench", []),
    ]:
        assert problems(project, overrides, name) == [], name


def test_listed_sweep_values_meet_the_components_rules(project: Path) -> None:
    found = problems(project, ["data.batch_size=0,64", "model=cnn,mlp"], multirun=True)
    assert found == ["data.batch_size=0: must be an integer >= 1 (e.g. data.batch_size=64)"]


def test_a_class_outside_the_roots_is_refused_without_importing_it(project: Path) -> None:
    (line,) = problems(project, ["data._target_=os.system"])
    assert line.startswith("data names 'os.system', which is not a class defined under")
    assert "refused without importing it" in line


def test_keys_outside_components_and_moved_keys_keep_hydras_error(project: Path) -> None:
    for key in ("trainer.max_epoch=3", "model.optimizer.lr=0.1"):
        with pytest.raises(ConfigCompositionException):
            precheck.check(project / "configs", "train", [key])


def test_hints_name_declared_settings(project: Path) -> None:
    found = typos.nearest_names(project / "configs", "train", ["data=noisy_bare", "data.nosie=1"])
    (line,) = found
    assert line.startswith("no key 'data.nosie'; did you mean: data.noise, ")
    cfg = precheck.composed(project / "configs", "train", ["model=mlp"], multirun=False)
    hint = hints.shape_mismatch(RuntimeError("mat1 and mat2 shapes cannot be multiplied"), cfg)
    assert hint is not None
    assert "net's sizes (model.net.hidden, model.net.dropout)" in hint
