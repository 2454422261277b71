"""Check that requirements.lock is current: every ``==`` pin in requirements*.txt is the
version the lock pins for that package.

    python scripts/check_lock.py [PROJECT_DIR]      # `make check-lock`; CI runs it too

Offline, standard library only. Prints one line per stale pin, with the fix, and exits 1;
a bumped requirements line (e.g. a Dependabot pull request) fails here until ``make lock``
has rewritten the lock.
"""

import re
import sys
from pathlib import Path

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")
FIX = "run `make lock` and commit requirements.lock"


def normalise(name: str) -> str:
    """The package name as the index compares it: lowercase, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """``{name: version}`` of each ``name==version`` line of a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            found[normalise(match.group(1))] = match.group(2)
    return found


def stale_pins(root: Path) -> list[str]:
    """One line per requirements pin the lock does not match; empty if it is current."""
    lock_path = root / "requirements.lock"
    if not lock_path.is_file():
        return [f"{lock_path} is missing; {FIX}"]
    lock = pins(lock_path)
    problems = []
    for source in sorted(root.glob("requirements*.txt")):
        for name, version in pins(source).items():
            locked = lock.get(name)
            if locked is None:
                problems.append(f"{source.name}: {name}=={version} is not in the lock; {FIX}")
            elif locked != version:
                problems.append(
                    f"{source.name}: {name}=={version} but requirements.lock has "
                    f"{name}=={locked}; {FIX}"
                )
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = stale_pins(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print("requirements.lock matches every pin in requirements*.txt")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
