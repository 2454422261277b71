"""post_gen starts the project's git repository (pre-commit and CI need one), offline and
without committing, and leaves alone a folder already inside a repository or a machine
without git."""

import shutil
import sys
from pathlib import Path

from conftest import TEMPLATE, run

NO_GIT_IDENTITY = {  # nothing is committed, so a missing identity must not matter
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def bake_cli(out: Path, **env: str):
    command = [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(out), str(TEMPLATE)]
    return run(*command, cwd=out, **env)


def test_a_fresh_bake_is_a_git_repository_with_every_file_staged(tmp_path: Path) -> None:
    result = bake_cli(tmp_path, **NO_GIT_IDENTITY)
    assert result.returncode == 0, result.stdout + result.stderr
    project = tmp_path / "digits-classifier"
    top = run("git", "rev-parse", "--show-toplevel", cwd=project)
    assert Path(top.stdout.strip()) == project
    assert run("git", "branch", "--show-current", cwd=project).stdout.strip() == "main"
    assert run("git", "rev-parse", "HEAD", cwd=project).returncode != 0  # no commit
    staged = set(run("git", "ls-files", cwd=project).stdout.split())  # what pre-commit checks
    untracked = run("git", "ls-files", "--others", "--exclude-standard", cwd=project).stdout
    assert {"README.md", "pyproject.toml", ".pre-commit-config.yaml", "LICENSE"} <= staged
    assert untracked == ""
    assert 'git commit -m "Bake from torchplate"' in result.stdout  # the next step printed
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert 'git commit -m "Bake from torchplate"' in readme.split("## Quickstart")[1][:300]


def test_a_bake_inside_a_repository_gets_no_repository_of_its_own(tmp_path: Path) -> None:
    assert run("git", "init", "-q", cwd=tmp_path).returncode == 0
    result = bake_cli(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "digits-classifier" / ".git").exists()
    assert "git commit" not in result.stdout and "git init" not in result.stdout


def test_without_git_the_bake_succeeds_and_says_what_to_run(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    assert shutil.which("git", path=str(empty)) is None
    result = bake_cli(out, PATH=str(empty))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "digits-classifier" / "LICENSE").is_file()
    assert not (out / "digits-classifier" / ".git").exists()
    assert "git init && git add -A" in result.stdout
