"""Finish the baked project: keep the chosen license, drop the files of options not
chosen, then print the next steps.

No prompts and no network; running it twice leaves the same tree (cruft runs it again
on every update).
"""

import shutil
from pathlib import Path

LICENSE = {{ cookiecutter.license|data }}
SLUG = {{ cookiecutter.project_slug|data }}
LOGGER = {{ cookiecutter.logger|data }}
CI = {{ cookiecutter.ci|data }}
DOCKER = {{ cookiecutter.docker|data }}

# Files and folders that belong to one answer, and whether that answer was given.
OPTIONAL_PATHS = {
    "configs/logger/wandb.yaml": LOGGER == "wandb",
    "configs/logger/mlflow.yaml": LOGGER == "mlflow",
    ".github": CI == "github",
    "Dockerfile": DOCKER == "yes",
    ".dockerignore": DOCKER == "yes",
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


def main() -> None:
    root = Path.cwd()
    keep_license(root, LICENSE)
    drop_unchosen(root, OPTIONAL_PATHS)
    print(
        f"\nBaked {SLUG}. Next steps:\n"
        f"  cd {SLUG}\n"
        "  make train   # builds .venv from requirements.lock, then trains\n"
        "  make test\n"
    )


if __name__ == "__main__":
    main()
