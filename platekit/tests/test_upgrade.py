"""A project's checkpoints from earlier releases, one per shipped data config (platekit 0.1.0
and 0.2.0, tests/fixtures/README.md says how each was made), evaluate, export, predict and resume
under this platekit; YAML and an ejected module of before get one line naming the change."""

import logging
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from platekit._errors import UserError
from platekit.checkpoints import Checkpoint
from platekit.testing import predict_rows, write_image_folder

from support import (
    FIXTURES,
    QUICK,
    cli_env,
    compose_config,
    copy_project,
    module,
    run_cli,
    run_python,
)

DATA = FIXTURES
FIXTURES = [
    ("0.1", "digits"), ("0.1", "csv"), ("0.1", "diabetes"), ("0.1", "image_folder"),
    ("0.2", "digits"), ("0.2", "csv"), ("0.2", "diabetes"), ("0.2", "image_folder"),
    ("0.2", "sequences"),
]  # fmt: skip


# The model settings each fixture was trained with (tests/fixtures/README.md): init_from takes
# the weights into the same architecture.
ARCHITECTURE = {
    "csv": ["model=mlp", "model.net.hidden=[8]"],
    "diabetes": ["model=regressor", "model.net.hidden=[8]"],
    "image_folder": ["model.net.channels=[4,8]", "data.image_size=8", "data.num_workers=0"],
}


def data_settings(name: str, tmp_path: Path) -> list[str]:
    """Where each old checkpoint's data is now: its example tables are written again into
    the test's folder, its image folder made again (the same images)."""
    if name in ("csv", "diabetes"):
        return ["+data.path=null", f"+data.data_dir={tmp_path / 'tables'}"]
    if name == "image_folder":
        root = tmp_path / "images"
        if not root.exists():
            write_image_folder(root, classes=3, per_class=12, size=16)
        return [f"+data.root={root}"]
    return []


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The ``error:`` lines a command printed (its report goes to stdout, as every refusal's)."""
    return [line for line in result.stdout.splitlines() if line.startswith("error: ")]


def checkpoint_of(version: str, name: str) -> Path:
    return DATA / f"platekit-{version}" / f"{name}.ckpt"


@pytest.mark.slow
@pytest.mark.parametrize(("version", "name"), FIXTURES)
def test_an_old_checkpoint_evaluates_exports_predicts_and_resumes(
    version: str, name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = checkpoint_of(version, name)
    data = data_settings(name, tmp_path)
    caplog.set_level(logging.INFO)

    evaluated = module("eval").evaluate(
        compose_config(tmp_path / "eval", [f"ckpt_path={old}", *data], "eval")
    )
    assert np.isfinite(list(evaluated["test"].values())).all()
    assert "records no fingerprint of its data (platekit < 0.3)" in caplog.text

    export = [f"ckpt_path={old}", "repeats=1", *data]
    module("export").export(compose_config(tmp_path / "export", export, "export"))
    [onnx] = (tmp_path / "export").rglob("model.onnx")

    overrides = {key.lstrip("+").removeprefix("data."): value for key, value in
                 (setting.split("=", 1) for setting in data)}  # fmt: skip
    datamodule = Checkpoint.open(old).datamodule(
        {k: None if v == "null" else v for k, v in overrides.items()}
    )
    datamodule.setup("test")
    inputs = tmp_path / "test.npy"
    np.save(inputs, datamodule.raw_inputs("test").numpy())
    tested = len(datamodule.raw_inputs("test"))
    answers = [predict_rows(tmp_path / f"p{i}", m, inputs) for i, m in enumerate((old, onnx))]
    assert len(answers[0]) == len(answers[1]) == tested > 0
    first = [row.get("prediction", row.get("class")) for row in answers[0]]
    second = [row.get("prediction", row.get("class")) for row in answers[1]]
    if isinstance(first[0], float):  # a regression: the same values to float32's digits
        np.testing.assert_allclose(first, second, rtol=1e-4, atol=1e-4)
    else:  # classes: the checkpoint and its ONNX agree
        assert first == second

    run = tmp_path / "resume" / "checkpoints"
    run.mkdir(parents=True)
    shutil.copyfile(old, run / "last.ckpt")
    if data:  # its data is not where it trained: a resume refuses, naming init_from
        moved = [*QUICK, "trainer.max_epochs=2", f"ckpt_path={run / 'last.ckpt'}"]
        moved += [f"data={name}", *(setting.lstrip("+") for setting in data)]
        with pytest.raises(UserError, match=r"a resumed run keeps .* init_from="):
            module("train").train(compose_config(tmp_path / "resume", moved), overrides=moved)
        again = [*QUICK, "trainer.max_epochs=1", f"init_from={run / 'last.ckpt'}"]
        again += [f"data={name}", *(setting.lstrip("+") for setting in data)]
        again += ARCHITECTURE[name]
        tuned = module("train").train(compose_config(tmp_path / "tune", again), overrides=again)
        assert np.isfinite(list(tuned["test"].values())).all()
        return
    again = [*QUICK, "trainer.max_epochs=2", f"ckpt_path={run / 'last.ckpt'}"]
    resumed = module("train").train(compose_config(tmp_path / "resume", again), overrides=again)
    assert resumed["epochs"] == 2
    assert np.isfinite(list(resumed["test"].values())).all()
    assert "records no run settings (written before platekit 0.3)" in caplog.text
    assert torch.load(run / "last.ckpt", weights_only=True)["epoch"] == 1  # one more epoch


def test_a_config_naming_a_moved_class_is_one_line_naming_the_new_name(tmp_path: Path) -> None:
    """0.2's configs named platekit's modules (``platekit.runtime.run_start.RunStart``)."""
    result = run_cli(
        "train", "+callbacks.old._target_=platekit.runtime.run_start.RunStart",
        "trainer.max_epochs=1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert error_lines(result) == ["error: config has 1 problem:"], result.stdout[-2000:]
    problem = result.stdout.split("error: config has 1 problem:\n", 1)[1].splitlines()[0]
    assert problem.strip() == (
        "callback at callbacks.old names 'platekit.runtime.run_start.RunStart', which "
        "platekit 0.4 moved: write 'platekit.training.RunStart' in the config"
    ), problem
    assert not (tmp_path / "outputs").exists()


EJECTED_BEFORE = """from platekit.cli.errors import UserError
from platekit.models.schedules import Cosine as Base


class Cosine(Base):
    \"\"\"A team's copy of 0.2's schedule (``platekit eject models.schedules``).\"\"\"
"""


def test_an_ejected_module_of_before_is_one_line_naming_the_import(tmp_path: Path) -> None:
    project = copy_project(tmp_path, "upgrade_probe")
    ejected = project / "src" / "upgrade_probe" / "models" / "schedules.py"
    ejected.write_text(EJECTED_BEFORE)
    config = project / "configs" / "scheduler" / "cosine.yaml"
    config.write_text(
        config.read_text().replace(
            "platekit.models.Cosine", "upgrade_probe.models.schedules.Cosine"
        )
    )
    env = {**cli_env(), "PYTHONPATH": str(project / "src"), "CONFIG_DIR": str(project / "configs")}
    train = ["-m", "upgrade_probe.train", *QUICK, "trainer.max_epochs=1"]
    train.append("scheduler=cosine")
    for fix in ("from platekit import UserError", "from platekit.models import Cosine as Base"):
        result = run_python(train, project, env)
        assert result.returncode == 1, result.stderr[-2000:]
        (line,) = error_lines(result)
        assert "Traceback" not in result.stderr, result.stderr[-2000:]
        assert line.startswith(f"error: {ejected}:"), line
        assert line.endswith(f"import public names instead: {fix}"), line
        assert not (project / "outputs" / "train" / "runs").exists() or not any(
            (project / "outputs" / "train" / "runs").iterdir()
        )
        old = fix.replace("from platekit import", "from platekit.cli.errors import").replace(
            "from platekit.models import", "from platekit.models.schedules import"
        )
        ejected.write_text(ejected.read_text().replace(old, fix))  # the user applies the fix
    result = run_python(train, project, env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
