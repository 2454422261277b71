"""Print the baked project's declared pins as a pip requirements file, for the template's
own test environment (`make test` builds it).

    python3 tools/bake_pins.py > .venv/bake-pins.txt

The bake's pyproject.toml is a Jinja template, so it is read as text: every ``"name==x"``
of its dependencies and its dev group, each answer's included (both loggers' and the
server's: the template's tests bake them all), and its vendor/ folder as ``--find-links``.
Every pin is written once, in the bake. Standard library only: it runs before any venv.
"""

import re
import shlex
import sys
from pathlib import Path

BAKE = Path(__file__).resolve().parents[1] / "{{cookiecutter.project_slug}}"
# A requirement string with an == pin: extras and a marker allowed, either quote.
PIN = re.compile(
    r"""^\s*["']([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*==[^"']+)["'],?""", re.MULTILINE
)


def bake_pins(pyproject: str) -> list[str]:
    """Every declared ``name==version`` of the bake's pyproject.toml text, Jinja and all."""
    return PIN.findall(pyproject)


def main() -> None:
    vendor = shlex.quote(str(BAKE / "vendor"))  # pip splits option lines as a shell does
    lines = [f"--find-links {vendor}", *bake_pins((BAKE / "pyproject.toml").read_text())]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
