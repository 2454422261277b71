"""Write (or check) import_names.txt: every top-level module the baked project's locks install.

A package named like one of them shadows it (``package_name=platekit`` baked, then every
command failed with ``No module named 'platekit.train'``). The names come from the records
of the installed distributions the locks pin (every answer's branch of requirements.lock,
the CUDA lock, pip.lock): the template's venv installs them all but the CUDA build's own
packages, whose records this machine cannot hold; for those the lock's names give the
import names their wheels install (``nvidia-cublas`` -> ``nvidia``, ``cuda-bindings`` ->
``cuda``), listed after a comment line. ``make lock`` writes the file; the template's tests
check it against the installed records (``--check``).

    python tools/import_names.py [--check]
"""

import re
import sys
from importlib import metadata
from pathlib import Path

from bake_pins import every_branch

TEMPLATE = Path(__file__).resolve().parents[1]
BAKE = TEMPLATE / "{{cookiecutter.project_slug}}"
LOCKS = [BAKE / "requirements.lock", BAKE / "requirements-cu130.lock", BAKE / "pip.lock"]
OUT = TEMPLATE / "import_names.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==", re.MULTILINE)
NOT_INSTALLED = "# from the CUDA lock's names (not installed on this machine):"


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> list[str]:
    """Every distribution any lock pins, normalised, sorted."""
    names = set()
    for lock in LOCKS:
        names.update(PIN.findall("\n".join(every_branch(lock.read_text(encoding="utf-8")))))
    return sorted({normal(name) for name in names})


def top_level(distribution: metadata.Distribution) -> set[str]:
    """The top-level modules and packages a distribution's RECORD installs."""
    found = set()
    for file in distribution.files or []:
        parts = file.parts
        if (
            not parts
            or parts[0] in ("..", "__pycache__")
            or parts[0].endswith((".dist-info", ".egg-info", ".data", ".pth"))
        ):
            continue
        head = parts[0]
        if len(parts) == 1:  # a top-level module file: x.py, x.cpython-311-...so
            if not head.endswith((".py", ".so", ".pyd")):
                continue
            head = head.split(".")[0]
        if head.isidentifier():
            found.add(head)
    return found


def from_name(distribution: str) -> str:
    """The import name a wheel of ``distribution`` installs, from its name alone."""
    first = distribution.split("-")[0]
    return first if first in ("nvidia", "cuda") else distribution.replace("-", "_")


def names() -> tuple[list[str], list[str]]:
    """``(from installed records, from the names of pins not installed here)``."""
    installed = {  # installed by pip (a RECORD), not a source tree's .egg-info
        normal(d.metadata["Name"]): d
        for d in metadata.distributions()
        if d.read_text("RECORD") is not None
    }
    recorded: set[str] = set()
    derived: set[str] = set()
    for distribution in pinned():
        modules = top_level(installed[distribution]) if distribution in installed else set()
        if modules:
            recorded |= modules
        elif distribution in installed:  # an editable install (platekit's): a .pth only
            recorded.add(from_name(distribution))
        else:
            derived.add(from_name(distribution))
    return sorted(recorded), sorted(derived - recorded)


def text() -> str:
    recorded, derived = names()
    header = "# Written by tools/import_names.py (make lock): no package_name may be one of these."
    return "\n".join([header, *recorded, NOT_INSTALLED, *derived]) + "\n"


def main() -> int:
    wanted = text()
    if "--check" in sys.argv[1:]:
        if OUT.read_text(encoding="utf-8") != wanted:
            print(f"error: {OUT.name} is not what the installed locks give; run make lock")
            return 1
        return 0
    OUT.write_text(wanted, encoding="utf-8")
    print(f"wrote {OUT.name} ({len(wanted.splitlines()) - 2} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
