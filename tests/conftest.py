"""Helpers to bake the template and to run what it bakes."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]

# Valid but awkward answers: quotes, apostrophe, backslash, non-ASCII, emoji, a newline.
HOSTILE_ANSWERS = {
    "project_name": 'Café "Ünïcode" 🚀 Net',
    "author_name": 'O\'Brien "OB" \\ Smith',
    "author_email": "ob.smith+ml@example.co.uk",
    "description": "Line one: 'quotes' \"double\" \\ back.\nLine two 🚀 ünïcode: {braces}",
}


def bake(output_dir: Path, **answers: str) -> Path:
    """Bake the template without prompts; return the project folder."""
    return Path(
        cookiecutter(
            str(TEMPLATE),
            no_input=True,
            extra_context=answers,
            output_dir=str(output_dir),
        )
    )


def bake_cli(output_dir: Path, *answers: str) -> subprocess.CompletedProcess:
    """Bake through the ``cookiecutter`` command, as a user would; answers are key=value."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cookiecutter",
            "--no-input",
            "-o",
            str(output_dir),
            str(TEMPLATE),
            *answers,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def python_in(project: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ``python args...`` (this interpreter) in a baked project with ``src`` importable."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_entry(
    project: Path, entry: str, root: Path, *overrides: str
) -> tuple[subprocess.CompletedProcess, Path | None]:
    """``python -m <package>.<entry>`` with outputs under ``root``; the result and its run dir.

    The run directory is ``None`` when the command wrote none.
    """
    package = next(p.name for p in (project / "src").iterdir() if (p / "__init__.py").is_file())
    result = python_in(project, "-m", f"{package}.{entry}", *overrides, f"paths.root_dir={root}")
    runs = root / "outputs" / entry / "runs"
    found = list(runs.iterdir()) if runs.is_dir() else []
    assert len(found) <= 1, found
    return result, (found[0] if found else None)


@pytest.fixture(scope="session")
def default_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project baked with the default answers, shared by read-only tests."""
    return bake(tmp_path_factory.mktemp("default"))


def tail(result: subprocess.CompletedProcess, chars: int = 3000) -> Any:
    """The end of a command's output, for assertion messages."""
    return (result.stdout + result.stderr)[-chars:]


def tool(name: str) -> str:
    """A command-line tool installed beside this interpreter (the template's .venv)."""
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is missing: make the template's .venv (make test)"
    return str(path)


def run(*command: str, cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """Run a command and capture its output; extra keyword arguments are environment values."""
    return subprocess.run(
        list(command),
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# The longest tests first: with `-n 2` (make test) one worker runs platekit's suite while the
# other takes everything else, instead of both waiting for it at the end.
LONGEST_FIRST = ("test_platekit.py", "test_fresh_venv.py", "test_options.py", "test_own_data.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file is kept
