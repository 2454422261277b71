"""Write platekit's test project: the parts of a default ``serve=yes`` bake its tests run on.

    python tools/fixture_project.py            # rewrite platekit/tests/project from a fresh bake
    python tools/fixture_project.py --check    # exit 1 naming each file that differs

platekit's tests run on ``platekit/tests/project`` without cookiecutter. It holds what a run
reads (``src/``, ``configs/``, ``scripts/``, the README and Makefile its samples come from), each
file byte for byte the template's bake, and its ``pyproject.toml`` with the platekit pin
unversioned; the locks and the vendored wheel stay out (they change with every platekit build). A template test runs ``--check``, so a template change that is not
carried into the fixture fails there, naming this command.
"""

import re
import shutil
import sys
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
FIXTURE = TEMPLATE / "platekit" / "tests" / "project"
KEPT = ("src", "configs", "scripts", "README.md", "Makefile", "pyproject.toml")
# The pin of the vendored wheel names the source's hash: the fixture keeps the name alone.
PLATEKIT_PIN = re.compile(rb'"platekit==[^"]+"')
ANSWERS = {"serve": "yes"}
SKIPPED = {"__pycache__", ".ruff_cache"}


def bake(into: Path) -> Path:
    from cookiecutter.main import cookiecutter

    return Path(
        cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(into), extra_context=ANSWERS)
    )


def files(root: Path) -> dict[str, bytes]:
    """Every kept file under ``root`` by its relative path."""
    found: dict[str, bytes] = {}
    for name in KEPT:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            if not SKIPPED.intersection(path.relative_to(root).parts):
                data = path.read_bytes()
                if name == "pyproject.toml":
                    data = PLATEKIT_PIN.sub(b'"platekit"', data)
                found[path.relative_to(root).as_posix()] = data
    return found


def differences(baked: Path, fixture: Path = FIXTURE) -> list[str]:
    """The relative paths where the fixture is not the bake (missing, extra or changed)."""
    want, have = files(baked), files(fixture)
    return sorted(p for p in want.keys() | have.keys() if want.get(p) != have.get(p))


def write(baked: Path, fixture: Path = FIXTURE) -> None:
    shutil.rmtree(fixture, ignore_errors=True)
    for relative, data in files(baked).items():
        target = fixture / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        shutil.copymode(baked / relative, target)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="fixture-bake-") as scratch:
        baked = bake(Path(scratch))
        if "--check" not in sys.argv[1:]:
            write(baked)
            print(f"wrote {FIXTURE.relative_to(TEMPLATE)} ({len(files(FIXTURE))} files)")
            return 0
        changed = differences(baked)
    for path in changed:
        print(f"platekit/tests/project/{path} is not the bake's", file=sys.stderr)
    if changed:
        print("fix: python tools/fixture_project.py", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
