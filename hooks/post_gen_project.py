"""Finish the baked project: keep the chosen license, drop the files of options not
chosen, start its git repository, then print the next steps.

No prompts and no network; running it twice leaves the same tree (cruft runs it again
on every update).
"""

import shutil
import subprocess
from pathlib import Path

LICENSE = {{ cookiecutter.license|data }}
SLUG = {{ cookiecutter.project_slug|data }}
LOGGER = {{ cookiecutter.logger|data }}
CI = {{ cookiecutter.ci|data }}
DOCKER = {{ cookiecutter.docker|data }}
SERVE = {{ cookiecutter.serve|data }}
PACKAGE = {{ cookiecutter.package_name|data }}
# cruft records the template commit; it also bakes into scratch folders to diff two
# template versions, where a .git of ours would be diffed and applied.
UNDER_CRUFT = {{ "_commit" in cookiecutter }}

# Files and folders that belong to one answer, and whether that answer was given.
OPTIONAL_PATHS = {
    "configs/logger/wandb.yaml": LOGGER == "wandb",
    "configs/logger/mlflow.yaml": LOGGER == "mlflow",
    ".github": CI == "github",
    "scripts/audit.lock": CI == "github",  # pip-audit, for the workflow's scan
    "Dockerfile": DOCKER == "yes",
    ".dockerignore": DOCKER == "yes",
    f"src/{PACKAGE}/serve.py": SERVE == "yes",
    "configs/serve.yaml": SERVE == "yes",
}


def keep_license(root: Path, chosen: str) -> None:
    """Move ``licenses/<chosen>`` to ``LICENSE`` and drop the others."""
    options = root / "licenses"
    if not options.is_dir():  # already done by an earlier run
        return
    shutil.move(options / chosen, root / "LICENSE")
    shutil.rmtree(options)


def drop_unchosen(root: Path, optional: dict[str, bool]) -> None:
    """Remove each optional path whose answer was not chosen (if it is still there)."""
    for relative, chosen in optional.items():
        path = root / relative
        if chosen:
            continue
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def start_git_repository(root: Path) -> str:
    """``git init`` and stage every file (pre-commit needs a repository); return the step
    that is left to the user.

    Nothing is committed, so no git identity is needed. A folder already inside a
    repository (the user's own, or this one on a second run) is left alone, and so is a
    machine without git.
    """
    manual = "  git init && git add -A   # pre-commit and CI need a git repository\n"
    if UNDER_CRUFT or shutil.which("git") is None:
        return manual
    if git("rev-parse", "--is-inside-work-tree", cwd=root).stdout.strip() == "true":
        return ""
    # The CI workflow runs on pushes to main: start there unless the user chose a default.
    branch = git("config", "--get", "init.defaultBranch", cwd=root).stdout.strip() or "main"
    if git("-c", f"init.defaultBranch={branch}", "init", "-q", cwd=root).returncode != 0:
        return manual
    if git("add", "-A", cwd=root).returncode != 0:
        return "  git add -A   # stage the baked files\n"
    return '  git commit -m "Bake from torchplate"   # every file is staged; needs a git identity\n'


def main() -> None:
    root = Path.cwd()
    keep_license(root, LICENSE)
    drop_unchosen(root, OPTIONAL_PATHS)
    git_step = start_git_repository(root)
    print(
        f"\nBaked {SLUG}. Next steps:\n"
        f"  cd {SLUG}\n"
        "  make train   # builds .venv from requirements.lock, then trains\n"
        "  make test\n"
        f"{git_step}"
    )


if __name__ == "__main__":
    main()
