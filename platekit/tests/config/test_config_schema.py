"""Configs are checked against one schema before any work: one line per problem, exit 1,
no traceback, and a refused run leaves no run directory (a finished run's stays as it was)."""

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from platekit.testing import run_cli as run_project_cli

from support import CONFIG_DIR, PACKAGE, TESTS, cli_env, copy_project, module, run_cli

schema = module("config._schema")
trainer = module("config._trainer")
precheck = module("config._check")
Fresh = module("commands._rundir").Fresh
module("train")  # registers the run_dir resolver hydra.run.dir of train.yaml uses


def problems(overrides: list[str], config_name: str = "train", **options: Any) -> list[str]:
    return precheck.check(CONFIG_DIR, config_name, overrides, **options).problems


def package_of(path: Path) -> str:
    """Where a config file's keys land: its group's name, or the top for ``_global_``."""
    first = path.read_text().splitlines()[:1]
    if first and first[0].startswith("# @package"):
        package = first[0].split()[-1]
        return "" if package == "_global_" else package
    group = path.parent.relative_to(CONFIG_DIR).as_posix()
    return "" if group == "." else group.replace("/", ".")


def config_values() -> list[str]:
    """Every value of every file under configs/, as the dotted path it has in a run."""
    found = []
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        package = package_of(path)
        content = yaml.safe_load(path.read_text()) or {}
        content.pop("defaults", None)  # Hydra's composition list, not a value
        for key, _ in schema.leaves({package: content} if package else content):
            found.append(f"{path.relative_to(CONFIG_DIR)}: {key}")
    return found


def composed_with(path: Path) -> Any:
    """The config a file's values land in: its command's, or train's with its group chosen."""
    from hydra import compose, initialize_config_dir

    group = path.parent.relative_to(CONFIG_DIR).as_posix()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIG_DIR)):
        if group == ".":
            return compose(config_name=path.stem)
        return compose(config_name="train", overrides=[f"{group}={path.stem}"])


def test_every_value_in_configs_has_a_rule() -> None:
    """A run-level key has a written-out rule; a component's setting, its class's parameter."""
    values = config_values()
    assert len(values) > 150
    uncovered = []
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        if path.parent.name == "hydra":
            continue  # Hydra's own settings (hydra/default.yaml): checked by Hydra
        cfg = composed_with(path)
        for value in (v for v in values if v.startswith(f"{path.relative_to(CONFIG_DIR)}: ")):
            key = value.split(": ")[1]
            if schema.rule_for(key) is None and schema.rule_at(cfg, key) is None:
                uncovered.append(value)
    assert uncovered == []


def test_an_optimizers_settings_come_from_its_class_with_ranges_beside_them() -> None:
    assert problems(["optimizer.lr=nan", "optimizer.weight_decay=-1"]) == [
        "optimizer.lr=nan: must be a finite number > 0 (e.g. optimizer.lr=0.003)",
        (
            "optimizer.weight_decay=-1: must be a finite number >= 0 "
            "(e.g. optimizer.weight_decay=0.01)"
        ),
    ]
    found = problems(["optimizer=sgd", "optimizer.momentum=abc"])
    assert len(found) == 1
    assert found[0].startswith("optimizer.momentum=abc: must be")


def option_rounds() -> list[list[str]]:
    """Every ``group=option`` of configs/, as few command lines as take each one once."""
    groups: dict[str, list[str]] = {}
    for path in sorted(CONFIG_DIR.rglob("*/*.yaml")):
        group = path.parent.relative_to(CONFIG_DIR).as_posix()
        if group != "hydra":
            groups.setdefault(group, []).append(f"{group}={path.stem}")
    depth = max(len(options) for options in groups.values())
    return [[opts[i] for opts in groups.values() if i < len(opts)] for i in range(depth)]


@pytest.mark.parametrize("overrides", option_rounds(), ids=" ".join)
def test_every_shipped_option_meets_the_schema(overrides: list[str]) -> None:
    assert problems(overrides) == []


@pytest.mark.parametrize(
    ("config_name", "overrides"),
    [
        ("eval", ["ckpt_path=x.ckpt"]),
        ("export", ["ckpt_path=x.ckpt"]),
        ("predict", ["model_path=x.onnx", "inputs=x.npy"]),
        ("bench", []),
    ],
)
def test_every_command_default_meets_the_schema(config_name: str, overrides: list[str]) -> None:
    assert problems(overrides, config_name) == []


BAD_VALUES = [
    ("trainer.max_epochs=abc", "null or an integer >= -1 (e.g. trainer.max_epochs=15)"),
    ("data.batch_size=0", "an integer >= 1 (e.g. data.batch_size=64)"),
    ("data.num_workers=-1", "an integer >= 0 (e.g. data.num_workers=0)"),
    ("optimizer.lr=nan", "a finite number > 0 (e.g. optimizer.lr=0.003)"),
    ("seed=-1", "an integer from 0 to 4294967295 (e.g. seed=0)"),
    ("trainer.precision=half", "one of auto, 32-true, bf16-mixed, 16-mixed,"),
    ("trainer.devices=0", "one of auto, -1 or an integer >= 1 or"),
    ("trainer.accumulate_grad_batches=0", "an integer >= 1"),
    ("trainer.gradient_clip_val=0", "null or a finite number > 0"),
    ("trainer.log_every_n_steps=0", "null or an integer >= 1"),
    ("callbacks.early_stopping.patience=-2", "an integer >= 0"),
]


# The same keys again, with other bad values (a command line sets a key once).
MORE_BAD_VALUES = [
    ("data.batch_size=-1", "an integer >= 1 (e.g. data.batch_size=64)"),
    ("optimizer.lr=-1", "a finite number > 0 (e.g. optimizer.lr=0.003)"),
    ("seed=1099511627776", "an integer from 0 to 4294967295 (e.g. seed=0)"),
]


@pytest.mark.parametrize("cases", [BAD_VALUES, MORE_BAD_VALUES], ids=["bad", "more_bad"])
def test_every_bad_value_is_one_line(cases: list[tuple[str, str]]) -> None:
    found = problems([arg for override, _ in cases for arg in override.split()])
    assert len(found) == len(cases)  # data.seed (${seed}), say, does not repeat a bad seed
    for override, need in cases:
        line = f"{override.split()[-1]}: must be {need}"
        assert any(problem.startswith(line) for problem in found), line


def test_paths_that_are_files_are_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    need = "must be a directory path, not an existing file or below one"
    assert problems([f"hydra.run.dir={a_file}"]) == [
        f"hydra.run.dir={a_file}: {need} (e.g. hydra.run.dir=outputs/train/runs/mine)"
    ]
    assert problems([f"paths.log_dir={a_file}/logs"]) == [
        f"paths.log_dir={a_file}/logs: {need} (e.g. paths.log_dir=outputs)"
    ]


def test_all_problems_are_listed_and_related_values_checked_together() -> None:
    found = problems(["seed=-1", "data.batch_size=0", "trainer.max_epochs=abc"])
    named = [line.split("=")[0] for line in found]
    assert named == ["seed", "data.batch_size", "trainer.max_epochs"]
    assert precheck.report(found[:1]).splitlines()[0] == "config has 1 problem:"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.val_fraction=0.6", "data.test_fraction=0.5"], "must be between 0 and 1"),
        (["data.normalize=max"], "data.normalize=max is not one of scalar, channel"),
        (["data=csv", "data.path=/no/such/table.csv"], "data.path '/no/such/table.csv'"),
    ],
)
def test_what_only_the_data_can_judge_is_one_line_at_setup(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    """Checked once, where the data module sets up (not twice, in the schema too)."""
    with pytest.raises(module("_errors").UserError, match=message):
        module("testing").build_datamodule(tmp_path, overrides)


def test_unset_values_and_unresolvable_ones_are_named() -> None:
    assert problems([], "eval") == [
        (
            "ckpt_path=???: must be set, to a checkpoint path "
            "(e.g. ckpt_path=outputs/train/runs/<time>/checkpoints/last.ckpt)"
        )
    ]
    (line,) = problems(["data.batch_size=${oc.env:NO_SUCH_VARIABLE_SET}"])
    assert line.startswith("data.batch_size=${oc.env:NO_SUCH_VARIABLE_SET}: cannot be resolved")


def test_multirun_checks_fixed_and_listed_sweep_values() -> None:
    found = problems(["data.batch_size=0,64", "seed=-1", "model=cnn,mlp"], multirun=True)
    assert found == [
        "seed=-1: must be an integer from 0 to 4294967295 (e.g. seed=0)",
        "data.batch_size=0: must be an integer >= 1 (e.g. data.batch_size=64)",
    ]
    assert problems(["trainer.max_epochs=range(1,3)", "optimizer.lr=0.1,0.01"]) == []
    # A multirun makes a directory per job: none is planned (or removed) up front.
    assert precheck.check(CONFIG_DIR, "train", ["seed=0,1"], multirun=True).run_dir is None


@pytest.mark.slow
def test_commands_that_run_no_task_are_not_checked(tmp_path: Path) -> None:
    for flag in ("--help", "--info", "--cfg=job"):
        result = run_cli("train", "seed=-1", flag, cwd=tmp_path)
        assert result.returncode == 0, result.stdout[-2000:]
        assert "error:" not in result.stdout
    assert "seed: -1" in result.stdout  # the job's config, printed as composed
    assert list(tmp_path.iterdir()) == []


def test_only_a_run_directory_this_run_made_and_left_empty_is_removed(tmp_path: Path) -> None:
    """Empty of the run's own files: Hydra's ``.hydra/``, the log, and the config the run
    saves before building its trainer (which may still refuse it) do not count."""
    runs = tmp_path / "outputs" / "train" / "runs"
    finished = runs / "finished"
    (finished / ".hydra").mkdir(parents=True)
    fresh = Fresh()
    fresh.note(runs / "planned")
    made = runs / "one_second_later"  # ${now:...} may tick between the check and Hydra
    (made / ".hydra").mkdir(parents=True)
    (made / "train.log").write_text("error: ...\n")
    assert fresh.discard(made)
    assert not made.exists()
    assert not fresh.discard(finished)  # it existed before
    assert finished.is_dir()

    fresh.note(tmp_path / "new" / "runs" / "planned")
    made = tmp_path / "new" / "runs" / "planned"
    (made / ".hydra").mkdir(parents=True)
    (made / "config.yaml").write_text("seed: 0\n")  # saved before the trainer refused
    (made / "checkpoints").mkdir()  # the run trained: a real (failed) run
    assert not fresh.discard(made)
    assert made.is_dir()
    (made / "checkpoints").rmdir()
    assert fresh.discard(made)
    assert not (tmp_path / "new").exists()  # nor the folders made for it


# A key each command's own code reads, declared beside that code, with a value it refuses.
OWN_KEYS = [
    ("train", "compile=yes", "compile=yes: must be true or false (e.g. compile=true)"),
    ("eval", "new_data=2", "new_data=2: must be true or false (e.g. new_data=true)"),
    ("export", "opset=3", "opset=3: must be an integer >= 7 (e.g. opset=18)"),
    ("predict", "batch_size=0", "batch_size=0: must be an integer >= 1 (e.g. batch_size=512)"),
    ("serve", "port=70000", "port=70000: must be an integer from 0 to 65535 (e.g. port=8000)"),
    ("bench", "bench.rounds=0", "bench.rounds=0: must be an integer >= 1 (e.g. bench.rounds=3)"),
]


NEEDED = {  # the values each command must be given
    "eval": ["ckpt_path=x.ckpt"],
    "export": ["ckpt_path=x.ckpt"],
    "predict": ["model_path=m.onnx", "inputs=x.npy"],
    "serve": ["model_path=m.onnx"],
}


@pytest.mark.slow
def test_each_command_checks_the_keys_its_own_code_declares(tmp_path: Path) -> None:
    for command, override, line in OWN_KEYS:
        if command == "serve":
            pytest.importorskip("uvicorn")
        result = run_cli(command, override, *NEEDED.get(command, []), cwd=tmp_path)
        assert result.returncode == 1, (command, result.stdout[-2000:])
        assert result.stdout.splitlines()[1:] == [f"  {line}"], (command, result.stdout)
        assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_config_without_the_check_callback_is_refused_naming_it(tmp_path: Path) -> None:
    """A project upgraded without CheckRun would train unchecked (a reused RUN_NAME too)."""
    root = copy_project(tmp_path, PACKAGE)
    hydra_yaml = root / "configs" / "hydra" / "default.yaml"
    text = hydra_yaml.read_text()
    start, end = text.index("callbacks:\n  check:"), text.index("job_logging:")
    hydra_yaml.write_text(text[:start] + text[end:])
    env = {**cli_env(), "PYTHONPATH": f"{root / 'src'}:{TESTS}", "PROJECT_ROOT": str(root)}
    del env["CONFIG_DIR"]  # the copy's own configs
    result = run_project_cli("train", "trainer.max_epochs=1", cwd=root, env=env)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == (
        "error: configs/hydra/default.yaml names no CheckRun callback, which checks the config "
        "before the run directory is made; add it under hydra's callbacks: check: "
        "{_target_: platekit.commands.CheckRun}"
    )
    assert not list(root.glob("outputs/train/runs/*/checkpoints"))  # nothing trained


@pytest.mark.slow
def test_cli_lists_every_problem_and_leaves_no_run_directory(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    result = run_cli(
        "train",
        "trainer.max_epochs=abc",
        "data.batch_size=0",
        "optimizer.lr=nan",
        "seed=1099511627776",
        f"hydra.run.dir={a_file}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "error: config has 5 problems:"
    assert f"  hydra.run.dir={a_file}: must be a directory path" in result.stdout
    assert (
        "  trainer.max_epochs=abc: must be null or an integer >= -1 (e.g. trainer.max_epochs=15)"
        in (lines)
    )
    assert "  data.batch_size=0: must be an integer >= 1 (e.g. data.batch_size=64)" in lines
    assert "Traceback" not in result.stdout + result.stderr
    assert "hint:" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # no outputs/, no .hydra/


def finished_run(trained: dict[str, Any], tmp_path: Path) -> Path:
    """A copy of the shared trained run, at outputs/train/runs/finished under ``tmp_path``."""
    run_dir = tmp_path / "outputs" / "train" / "runs" / "finished"
    shutil.copytree(trained["run_dir"], run_dir)
    return run_dir


def test_resume_with_a_bad_value_is_refused_before_its_run_directory(
    trained: dict[str, Any],
) -> None:
    last = trained["run_dir"] / "checkpoints" / "last.ckpt"
    planned = precheck.check(CONFIG_DIR, "train", [f"ckpt_path={last}", "trainer.max_epochs=abc"])
    assert planned.run_dir == trained["run_dir"]  # the finished run's, which it continues
    assert planned.problems == [
        "trainer.max_epochs=abc: must be null or an integer >= -1 (e.g. trainer.max_epochs=15)"
    ]


@pytest.mark.slow
def test_refused_resume_leaves_the_finished_run_as_it_was(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    run_dir = finished_run(trained, tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    last = run_dir / "checkpoints" / "last.ckpt"
    for override, said in (
        ("trainer.max_epochs=abc", "  trainer.max_epochs=abc: must be null or an integer >= -1"),
        # a mistyped callback: not a component's setting, though under callbacks
        ("callbacks.early_stoping.patience=3", "did you mean: callbacks.early_stopping.patience"),
    ):
        result = run_cli("train", f"ckpt_path={last}", override, cwd=tmp_path)
        assert result.returncode == 1
        assert said in result.stdout, result.stdout
        assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
        assert [p.name for p in run_dir.parent.iterdir()] == ["finished"]


@pytest.mark.parametrize(
    ("entry", "overrides", "error"),
    [
        ("export", ["ckpt_path=nowhere.ckpt"], "error: checkpoint 'nowhere.ckpt' does not exist"),
        (
            "predict",
            ["model_path=nowhere.onnx", "inputs=x.npy"],
            "error: model 'nowhere.onnx' does not exist",
        ),
        ("train", ["data.batch_size=0"], "  data.batch_size=0: must be an integer >= 1"),
        # refused inside the task, after the run took its lock (.run.lock)
        ("train", ["ckpt_path=nowhere.ckpt"], "error: checkpoint 'nowhere.ckpt' does not exist"),
    ],
)
@pytest.mark.slow
def test_cli_user_error_has_no_bogus_hints_and_no_run_directory(
    tmp_path: Path, entry: str, overrides: list[str], error: str
) -> None:
    result = run_cli(entry, *overrides, cwd=tmp_path)
    assert result.returncode == 1
    assert error in result.stdout
    assert "hint:" not in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []  # the refused run's directory was removed


@pytest.mark.slow
def test_refused_resume_inside_the_task_keeps_the_finished_run(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    """Refused after Hydra rewrote ``.hydra/`` and opened the log (and, for the precision,
    after the run saved its config): every file is put back, bytes and times, the log cut
    back to its length."""
    run_dir = finished_run(trained, tmp_path)

    def files() -> dict[Path, tuple[bytes, int]]:
        found = sorted(p for p in run_dir.rglob("*") if p.is_file())
        return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in found}

    before = files()
    last = run_dir / "checkpoints" / "last.ckpt"
    for override, said in (
        (f"init_from={last}", "error: ckpt_path and init_from are both set"),
        ("data.batch_size=7", "error: data.batch_size=7 but the checkpoint"),
        ("trainer.precision=16-true", "error: trainer.precision=16-true on CPU runs about"),
    ):
        result = run_cli("train", f"ckpt_path={last}", override, cwd=tmp_path)
        assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
        assert said in result.stdout, result.stdout
        assert files() == before, override


def test_a_trainer_key_typo_is_one_line_with_the_nearest_name() -> None:
    assert problems(["++trainer.max_epoch=1"]) == [
        "trainer.max_epoch is not a setting of lightning.Trainer (nearest: max_epochs, "
        "min_epochs, max_steps); fix the key"
    ]


def test_the_trainer_arguments_read_from_source_are_the_installed_lightnings() -> None:
    """Names and literal defaults, parsed from trainer.py, match Trainer's live signature."""
    import inspect

    from lightning import Trainer

    live = dict(inspect.signature(Trainer.__init__).parameters)
    live.pop("self")
    parsed = trainer.trainer_parameters()
    assert parsed is not None
    assert set(parsed) == set(live)
    for name, (_, default) in parsed.items():
        if default is not inspect.Parameter.empty:
            assert default == live[name].default, name


# Trainer arguments without a written rule: checked by their annotation in the installed
# Lightning, with the bounds config/_trainer.py adds.
TRAINER_VALUES = [
    ("trainer.benchmark=maybe", "trainer.benchmark=maybe: must be null or true or false"),
    ("trainer.num_sanity_val_steps=-2", "must be null or an integer >= -1"),
    ("trainer.reload_dataloaders_every_n_epochs=1.5", "must be an integer >= 0"),
    ("trainer.inference_mode=null", "must be true or false (e.g. trainer.inference_mode=true)"),
    ("trainer.max_time=5", "must be null or a string or a mapping"),
    ("trainer.num_nodes=0", "must be an integer >= 1 (e.g. trainer.num_nodes=1)"),
    ("trainer.val_check_interval=0", "val_check_interval=0: must be null or a finite number > 0"),
]


@pytest.mark.parametrize(("override", "expected"), TRAINER_VALUES)
def test_a_trainer_argument_is_checked_by_its_annotation(override: str, expected: str) -> None:
    found = problems([f"++{override}"])
    assert len(found) == 1, found
    assert expected in found[0]


def test_every_trainer_argument_has_a_rule_and_good_values_pass() -> None:
    parameters = trainer.trainer_parameters()
    assert parameters is not None
    assert all(trainer.trainer_rule(f"trainer.{name}") for name in parameters)
    assert problems(["++trainer.num_sanity_val_steps=0", "++trainer.benchmark=true",
                     "++trainer.max_time={minutes: 5}", "trainer.gradient_clip_val=1",
                     "trainer.log_every_n_steps=null", "++trainer.min_steps=10"]) == []  # fmt: skip


@pytest.mark.slow
def test_a_run_the_trainer_refuses_leaves_no_run_directory(tmp_path: Path) -> None:
    """Refused after the run saved its config, when the trainer is built."""
    result = run_cli("train", "trainer.precision=16-true", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: trainer.precision=16-true on CPU runs about 30x slower" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_setting_lightnings_callbacks_declare_is_checked_by_their_annotations() -> None:
    """Lightning's EarlyStopping is read by its signature as the project's classes are: a
    setting its YAML leaves out is typed, a typo names the nearest, not "add the parameter"."""
    assert problems(["++callbacks.early_stopping.min_delta=0.01"]) == []
    assert problems(["++callbacks.early_stopping.min_delta=abc"]) == [
        "callbacks.early_stopping.min_delta=abc: must be a finite number "
        "(e.g. callbacks.early_stopping.min_delta=0.0)"
    ]
    [verbose] = problems(["++callbacks.early_stopping.verbose=maybe"])
    assert verbose.startswith("callbacks.early_stopping.verbose=maybe: must be true or false")
    assert problems(["++callbacks.early_stopping.min_detla=1"]) == [
        "callbacks.early_stopping.min_detla is not a setting of EarlyStopping "
        "(nearest: min_delta); fix the key"
    ]


@pytest.mark.parametrize(
    ("override", "who"),
    [
        ("scheduler.total_steps=100", "Cosine"),
        ("scheduler.optimizer=1", "Cosine"),
        ("optimizer.params=1", "AdamW"),
    ],
)
def test_an_argument_the_model_passes_itself_is_refused_and_never_suggested(
    override: str, who: str
) -> None:
    """Accepted, it crashed in configure_optimizers ("got multiple values for keyword
    argument"); the hint for a typo of a neighbour offered it."""
    key = override.split("=")[0]
    assert problems([f"++{override}"]) == [
        f"{key} is given to {who} by the code that builds it ("
        + schema.SUPPLIED_BY[key.split(".")[0]]
        + "); remove it from the command line or config"
    ]
    [hint] = problems(["++scheduler.warmup_step=1"])
    assert "nearest: warmup_steps, warmup_epochs)" in hint


def test_a_trainer_argument_or_lightning_callback_setting_left_out_is_an_addition() -> None:
    """As ``data.noise=0.1``: Hydra refuses a key the YAML leaves out; the entry gives it
    again with ``+`` where the Trainer or the node's class declares it."""
    from hydra.errors import ConfigCompositionException

    def refused(key: str) -> ConfigCompositionException:
        return ConfigCompositionException(
            f"Could not override '{key}'.\nKey '...' is not in struct"
        )

    for key in ("trainer.max_steps", "callbacks.early_stopping.min_delta", "data.noise"):
        assert precheck.addition(refused(key), ["seed=1", f"{key}=5"]) == 1, key
    assert precheck.addition(refused("trainer.max_stepz"), ["trainer.max_stepz=5"]) is None
    assert precheck.addition(refused("paths.nowhere"), ["paths.nowhere=5"]) is None


@pytest.mark.slow
def test_settings_their_yaml_leaves_out_are_taken_without_plus_on_the_command_line(
    tmp_path: Path,
) -> None:
    result = run_cli(
        "train",
        "trainer.max_steps=25",
        "trainer.max_epochs=3",
        "callbacks.early_stopping.min_delta=0.01",
        "callbacks.progress_bar=null",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"epochs / steps\s+2 / 25", result.stdout), result.stdout[-2000:]
