"""What platekit's tests share: the project they run on, its modules, configs and commands.

The project is ``tests/project`` (the parts of the template's default bake a run reads;
conftest.py copies it once per session) or the bake ``PLATEKIT_TEST_PROJECT`` names.
``module(name)`` finds ``platekit.<name>`` (or the command body
``platekit.commands.<name>``) first and the project's ``<package>.<name>`` second, so a test
names the machinery and the project's recipes alike (``module("_errors").UserError``,
``module("export").check_parity``, ``module("train").train``).
"""

import os
import shutil
import signal
import subprocess
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from lightning import Callback, Trainer

import warm
from platekit import current
from platekit.testing import (  # noqa: F401  (re-exported for the tests)
    QUICK,
    StepLosses,
    compose_config,
    final_state,
    foreign_warnings,
    loss_logging,
    read_json,
    refuse_constant,
    step_losses,
    write_image_folder,
)
from platekit.testing import cli_env as project_env
from platekit.testing import run_cli as run_project_cli  # noqa: F401  (its own env)
from platekit.testing import start_cli as start_project_cli

ROOT = current().root  # the baked project's folder
CONFIG_DIR = current().config_dir
PACKAGE = current().package
TESTS = Path(__file__).resolve().parent  # this folder: importable by the commands tests run
FIXTURES = TESTS / "fixtures"  # checkpoints of earlier releases (fixtures/README.md)
# The template's project folder: what a bake is made of, unrendered.
BAKE = TESTS.parents[1] / "{{cookiecutter.project_slug}}"
# The guide every bake ships as docs/guide.md (copied unrendered). The fixture project leaves
# it out, so without the bake's own copy it is read from the template: one file, not two.
GUIDE = next(
    (path for path in (ROOT / "docs" / "guide.md", BAKE / "docs" / "guide.md") if path.is_file()),
    BAKE / "docs" / "guide.md",
)


def module(name: str) -> ModuleType:
    """``platekit.<name>``, else a command's body ``platekit.commands._<name>``, else the
    project's own ``<package>.<name>`` (``train``, ``eval``, ``data.digits``)."""
    for candidate in (f"platekit.{name}", f"platekit.commands._{name}"):
        try:
            return import_module(candidate)
        except ModuleNotFoundError as error:
            if error.name is None or not candidate.startswith(error.name):
                raise  # a module that exists failed to import something
    return import_module(f"{PACKAGE}.{name}")


def copy_project(into: Path, package: str) -> Path:
    """A copy of the suite's project whose package is named ``package`` (so one process can
    import both): its folder and every mention of the old name in its text files renamed."""
    skip = shutil.ignore_patterns(".git", ".venv", "outputs", "vendor", "__pycache__")
    root = Path(shutil.copytree(ROOT, into / ROOT.name, ignore=skip, symlinks=True))
    (root / "src" / PACKAGE).rename(root / "src" / package)
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            if PACKAGE in text:
                path.write_text(text.replace(PACKAGE, package))
    return root


def project_module(name: str) -> ModuleType:
    """The project's own ``<package>.<name>`` (its data modules, nets, recipes)."""
    return import_module(f"{PACKAGE}.{name}")


def python_path() -> str:
    return os.pathsep.join([str(ROOT / "src"), str(TESTS)])


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a command the tests run: the project's ``src`` and this folder
    importable (for test callbacks and data modules), one thread."""
    return project_env(PYTHONPATH=python_path(), **extra)


def start_cli(entry: str, *overrides: str, cwd: Path, **popen: Any):
    """``python -m <package>.<entry> overrides...`` started from ``cwd``: forked warm (see
    :func:`run_cli`) unless ``popen`` asks for more than the stderr pipe and a new session."""
    if popen.keys() <= {"stderr", "start_new_session"}:
        return warm.start(["-m", f"{PACKAGE}.{entry}", *overrides], cwd, cli_env(), **popen)
    return start_project_cli(entry, *overrides, cwd=cwd, **{"env": cli_env(), **popen})


def run_python(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python args...`` from ``cwd`` in ``env``, output captured as text; a ``python -m``
    command is forked from this worker's warm process where nothing differs (``warm.py``)."""
    return warm.run(args, cwd, env, timeout)


def run_cli(entry: str, *overrides: str, cwd: Path, timeout: float = 300):
    """``python -m <package>.<entry> overrides...`` from ``cwd``, forked from the warm process
    of this worker (``warm.py``: torch and Lightning imported once)."""
    return warm.run(["-m", f"{PACKAGE}.{entry}", *overrides], cwd, cli_env(), timeout)


def with_checkpoint(entry: str, path: Path, folder: Path) -> list[str]:
    """The overrides that hand checkpoint ``path`` to ``entry`` (a train resume, eval, export,
    or predict of two zero digit images written into ``folder``)."""
    if entry == "predict":
        inputs = folder / "x.npy"
        np.save(inputs, np.zeros((2, 1, 8, 8), np.float32))
        return [f"model_path={path}", f"inputs={inputs}"]
    return [f"ckpt_path={path}", *(["trainer.max_epochs=4"] if entry == "train" else [])]


def one_error_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one ``error:`` line of a command that exited 1 without a traceback, holding
    every one of ``words``."""
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    lines = output.splitlines()
    errors = [index for index, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, output[-3000:]
    block = [lines[errors[0]]]  # the line, and the problems it lists below it ("  ...")
    block += [line for line in lines[errors[0] + 1 :] if line.startswith("  ")][:20]
    said = "\n".join(block)
    for word in words:
        assert word in said, said
    return said


class SignalAtBatch(Callback):
    """Send this process SIGTERM at the end of its ``batch``-th training batch (from 1), or
    with ``validation=True`` its ``batch``-th batch of fit's validations (the sanity check
    not counted); once per ``marker`` file: a resumed run, which finds it, is not signalled
    again."""

    def __init__(self, batch: int, marker: str, validation: bool = False) -> None:
        self.batch, self.marker, self.validation, self.seen = batch, Path(marker), validation, 0

    def on_train_batch_end(self, trainer: Trainer, *args: object) -> None:
        if not self.validation:
            self._count()

    def on_validation_batch_end(self, trainer: Trainer, *args: object) -> None:
        if self.validation and not trainer.sanity_checking:
            self._count()

    def _count(self) -> None:
        self.seen += 1
        if self.seen == self.batch and not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGTERM)


def sigterm_at_batch(batch: int, marker: Path, validation: bool = False) -> list[str]:
    """The overrides that add :class:`SignalAtBatch`."""
    return [
        "+callbacks.signal._target_=support.SignalAtBatch",
        f"+callbacks.signal.batch={batch}",
        f"+callbacks.signal.marker={marker}",
        f"+callbacks.signal.validation={str(validation).lower()}",
    ]
