"""Template updates with cruft: a project baked from an older commit of the template is
brought to the newer one by `cruft update`, keeping the user's own edits.

cruft clones the template, so it sees committed files only: the test commits an older and
a newer state of this template into a scratch git repo of its own.
"""

import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import TEMPLATE, run, tail, tool

GIT_USER = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "__pycache__", ".pytest_cache", ".ruff_cache"
)
TRAINER = "{{cookiecutter.project_slug}}/configs/trainer/default.yaml"
MARKER = re.compile(r"^<{7} ", re.MULTILINE)  # a conflict marker starts a line
# The environment issue's first change (torch's build from the driver): its parent is the
# layout before it (one lock, pre-commit hooks in environments of their own).
ENVIRONMENT_CHANGE = "29b98ca"


def git(*args: str, cwd: Path) -> str:
    result = run("git", *args, cwd=cwd, **GIT_USER)
    assert result.returncode == 0, tail(result)
    return result.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture
def template_history(tmp_path: Path) -> tuple[Path, str, str]:
    """A git repo of this template: an older commit (10 epochs), then the current state."""
    repo = tmp_path / "torchplate"
    shutil.copytree(TEMPLATE, repo, ignore=SKIP)
    git("init", "-q", cwd=repo)
    current = (repo / TRAINER).read_text()
    assert "max_epochs: 15\n" in current
    (repo / TRAINER).write_text(current.replace("max_epochs: 15\n", "max_epochs: 10\n"))
    old = commit_all(repo, "old")
    (repo / TRAINER).write_text(current)
    new = commit_all(repo, "new")
    return repo, old, new


def conflicts(project: Path) -> list[Path]:
    """cruft exits 0 even when a hunk conflicts: find its markers and rejects ourselves."""
    return [
        path
        for path in project.rglob("*")
        if ".git" not in path.parts
        and path.is_file()
        and (path.suffix == ".rej" or MARKER.search(path.read_text(errors="replace")))
    ]


def bake_old(repo: Path, old: str, tmp_path: Path) -> Path:
    """``cruft create`` at the older commit, committed as the user's first commit."""
    out = tmp_path / "out"
    created = run(
        tool("cruft"),
        "create",
        "--no-input",
        "--checkout",
        old,
        "--output-dir",
        str(out),
        str(repo),
        cwd=tmp_path,
    )
    assert created.returncode == 0, tail(created)
    project = out / "digits-classifier"
    git("init", "-q", cwd=project)
    commit_all(project, "baked")
    return project


def test_cruft_update_brings_an_old_bake_up_to_date(
    template_history: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, old, new = template_history
    project = bake_old(repo, old, tmp_path)
    record = json.loads((project / ".cruft.json").read_text())
    assert record["commit"] == old
    assert Path(record["template"]).resolve() == repo.resolve()  # an absolute path
    assert record["context"]["cookiecutter"]["logger"] == "csv"
    assert "max_epochs: 10\n" in (project / "configs/trainer/default.yaml").read_text()
    assert (project / "LICENSE").is_file() and not (project / "licenses").exists()

    # An edit of the user's own, away from what the template changes.
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\n## Notes\n\nOur own notes.\n")
    commit_all(project, "notes")
    assert run(tool("cruft"), "check", cwd=project).returncode != 0  # it knows it is behind

    updated = run(tool("cruft"), "update", "--skip-apply-ask", cwd=project)
    assert updated.returncode == 0, tail(updated)
    assert conflicts(project) == []
    assert "max_epochs: 15\n" in (project / "configs/trainer/default.yaml").read_text()
    assert readme.read_text().endswith("## Notes\n\nOur own notes.\n")
    assert json.loads((project / ".cruft.json").read_text())["commit"] == new
    # The hooks ran again while updating and still dropped what they drop.
    assert (project / "LICENSE").is_file() and not (project / "licenses").exists()
    assert not (project / "Dockerfile").exists()
    checked = run(tool("cruft"), "check", cwd=project)
    assert checked.returncode == 0, tail(checked)
    assert run("git", "diff", "--quiet", "HEAD", cwd=project).returncode == 1  # changes to review


def test_a_conflicting_update_is_caught(
    template_history: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, old, _ = template_history
    project = bake_old(repo, old, tmp_path)
    trainer = project / "configs/trainer/default.yaml"
    trainer.write_text(trainer.read_text().replace("max_epochs: 10\n", "max_epochs: 12\n"))
    commit_all(project, "our own epochs")
    updated = run(tool("cruft"), "update", "--skip-apply-ask", cwd=project)
    assert updated.returncode == 0, tail(updated)  # the trap: success, yet a conflict
    assert conflicts(project) == [trainer]


@pytest.mark.slow
def test_a_bake_from_before_the_hashed_environment_updates_to_it(tmp_path: Path) -> None:
    shallow = run("git", "rev-parse", "--is-shallow-repository", cwd=TEMPLATE)
    if shallow.stdout.strip() == "true":
        pytest.skip("a shallow clone holds no earlier commit of the template")
    repo = tmp_path / "torchplate"
    repo.mkdir()
    archive = subprocess.run(
        ["git", "archive", f"{ENVIRONMENT_CHANGE}^"], cwd=TEMPLATE, capture_output=True,
        check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as files:
        files.extractall(repo, filter="data")
    git("init", "-q", cwd=repo)
    old = commit_all(repo, "before")
    for path in repo.iterdir():  # the template as it is now, as the next commit
        if path.name != ".git":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    shutil.copytree(TEMPLATE, repo, ignore=SKIP, dirs_exist_ok=True)
    commit_all(repo, "now")
    project = bake_old(repo, old, tmp_path)
    assert not (project / "requirements-cu130.lock").exists()

    updated = run(tool("cruft"), "update", "--skip-apply-ask", cwd=project)
    assert updated.returncode == 0, tail(updated)
    assert conflicts(project) == []
    assert (project / "requirements-cu130.lock").is_file()
    assert (project / "scripts" / "audit.lock").is_file()
    hooks = (project / ".pre-commit-config.yaml").read_text()
    assert "language: python" not in hooks and "additional_dependencies" not in hooks
    checked = run("python3", "scripts/check_lock.py", cwd=project)  # locks and vendor/ agree
    assert checked.returncode == 0, tail(checked)
