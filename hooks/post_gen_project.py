"""Finish the baked project: keep the chosen license, then print the next steps.

No prompts and no network; running it twice leaves the same tree.
"""

import shutil
from pathlib import Path

LICENSE = {{ cookiecutter.license|data }}
SLUG = {{ cookiecutter.project_slug|data }}


def keep_license(root: Path, chosen: str) -> None:
    """Move ``licenses/<chosen>`` to ``LICENSE`` and drop the others."""
    options = root / "licenses"
    if not options.is_dir():  # already done by an earlier run
        return
    shutil.move(options / chosen, root / "LICENSE")
    shutil.rmtree(options)


def main() -> None:
    root = Path.cwd()
    keep_license(root, LICENSE)
    print(
        f"\nBaked {SLUG}. Next steps:\n"
        f"  cd {SLUG}\n"
        "  make train   # builds .venv from the pinned requirements, then trains\n"
        "  make test\n"
    )


if __name__ == "__main__":
    main()
