"""Print the baked project's requirements.lock with every answer's lines, for the template's
own test environment (`make test` builds it, pip --require-hashes).

    python3 tools/bake_pins.py > .venv/bake-pins.txt

The bake's lock is a Jinja template with one guarded branch per answer (tools/relock.py
writes it so that answers combine: no package has two versions across branches), so the
union of its branches is one consistent hashed lock: the template's tests bake every
logger and the server. Its ``--find-links vendor`` becomes the absolute path of the bake's
vendor/ folder. Standard library only: it runs before any venv.
"""

import re
import shlex
import sys
from pathlib import Path

BAKE = Path(__file__).resolve().parents[1] / "{{cookiecutter.project_slug}}"
COMMENT = re.compile(r"\{#.*?#\}\n?", re.DOTALL)  # a Jinja comment, lines and all
GUARD = re.compile(r"^\s*\{%.*%\}\s*$")  # an {% if %} / {% endif %} line


def every_branch(lock: str) -> list[str]:
    """The lines of a Jinja lock with each guard taken: every answer's pins."""
    return [line for line in COMMENT.sub("", lock).splitlines() if not GUARD.match(line)]


def main() -> None:
    vendor = shlex.quote(str(BAKE / "vendor"))  # pip splits option lines as a shell does
    lines = every_branch((BAKE / "requirements.lock").read_text())
    sys.stdout.write(
        "\n".join(f"--find-links {vendor}" if line == "--find-links vendor" else line
                  for line in lines) + "\n"
    )  # fmt: skip


if __name__ == "__main__":
    main()
