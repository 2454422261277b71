"""Check that requirements.lock is current: every ``==`` pin pyproject.toml declares (its
dependencies and its dev group) is the version the lock pins for that package.

    python scripts/check_lock.py [PROJECT_DIR]      # `make check-lock`; CI runs it too

Offline, standard library only. Prints one line per stale pin, with the fix, and exits 1;
a bumped pin (e.g. a Dependabot pull request) fails here until ``make lock`` has rewritten
the lock. The lock must also carry pyproject's ``[tool.uv]`` ``find-links`` /
``index-url`` as pip's options, and each wheel in vendor/ must have the sha256 that
``vendor/platekit.txt`` pins (and the lock's version). requirements-cu130.lock (torch's CUDA
build and its CUDA packages) must pin torch and every package it shares with the lock at the
lock's versions, each line with its hashes.
"""

import hashlib
import re
import sys
import tomllib
from pathlib import Path

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")
HASHED = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s+--hash=sha256:([0-9a-f]{64})\s*$")
INDEX_OPTION = re.compile(r"^\s*(--find-links|--index-url|--extra-index-url|-f|-i)[\s=]+(\S+)")
FIX = "run `make lock` and commit requirements.lock"
WHEEL_FIX = "restore vendor/ from git (the template writes both with tools/build_wheel.py)"


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


def index_options(path: Path) -> list[str]:
    """The ``--find-links`` / ``--index-url`` lines of a requirements file, normalised."""
    found = []
    for line in path.read_text().splitlines():
        if match := INDEX_OPTION.match(line):
            found.append(f"{match.group(1)} {match.group(2)}")
    return found


def vendored_wheels(root: Path, lock: dict[str, str]) -> list[str]:
    """One line per wheel of ``vendor/*.txt`` whose file, sha256 or version is not current
    (the lock's line for it must carry the same sha256)."""
    problems = []
    lock_hashes = (
        {
            normalise(match.group(1)): set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
            for line in (root / "requirements.lock").read_text().splitlines()
            if (match := PIN.match(line)) and "--hash=" in line
        }
        if (root / "requirements.lock").is_file()
        else {}
    )
    for hashes in sorted((root / "vendor").glob("*.txt")):
        where = hashes.relative_to(root).as_posix()
        for line in hashes.read_text().splitlines():
            if not (match := HASHED.match(line)):
                continue
            name, version, pinned = normalise(match.group(1)), match.group(2), match.group(3)
            wheels = sorted(hashes.parent.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
            if not wheels:
                problems.append(f"{where}: no {name}-{version} wheel in vendor/; {WHEEL_FIX}")
                continue
            actual = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
            if actual != pinned:
                problems.append(
                    f"{where}: {wheels[0].name} has sha256 {actual[:12]}..., not the pinned "
                    f"{pinned[:12]}...; {WHEEL_FIX}"
                )
            locked_hash = lock_hashes.get(name)
            if locked_hash is not None and pinned not in locked_hash:
                problems.append(
                    f"requirements.lock: {name}=={version} does not carry the sha256 "
                    f"{pinned[:12]}... of {where}; {WHEEL_FIX}"
                )
            if lock.get(name) != version:
                problems.append(
                    f"{where}: {name}=={version} but requirements.lock has "
                    f"{name}=={lock.get(name)}; {FIX}"
                )
    return problems


def stale_pins(root: Path) -> list[str]:
    """One line per declared pin the lock does not match; empty if it is current."""
    lock_path = root / "requirements.lock"
    if not lock_path.is_file():
        return [f"{lock_path} is missing; {FIX}"]
    lock = pins(lock_path)
    locked_options = index_options(lock_path)
    problems = []
    source = "pyproject.toml"
    settings = tomllib.loads((root / source).read_text())
    uv = settings.get("tool", {}).get("uv", {})
    wanted = [f"--index-url {uv['index-url']}"] if uv.get("index-url") else []
    for option in [*wanted, *(f"--find-links {where}" for where in uv.get("find-links", []))]:
        if option not in locked_options:
            problems.append(f"{source}: `{option}` is not in requirements.lock; {FIX}")
    group = settings.get("dependency-groups", {}).get("dev", [])
    for requirement in [*settings["project"].get("dependencies", []), *group]:
        if not isinstance(requirement, str) or not (match := PIN.match(requirement)):
            continue  # a group include, or a pin that is not ==
        name, version = normalise(match.group(1)), match.group(2)
        locked = lock.get(name)
        if locked is None:
            problems.append(f"{source}: {name}=={version} is not in the lock; {FIX}")
        elif locked != version:
            problems.append(
                f"{source}: {name}=={version} but requirements.lock has {name}=={locked}; {FIX}"
            )
    return problems + vendored_wheels(root, lock) + cuda_lock(root, lock)


def cuda_lock(root: Path, lock: dict[str, str]) -> list[str]:
    """One line per pin of requirements-cu130.lock that disagrees with requirements.lock or
    carries no hash, or one line saying it is missing."""
    path = root / "requirements-cu130.lock"
    if not path.is_file():  # make setup, the Dockerfile and CI read it
        return [f"{path.name} is missing; {FIX}"]
    problems = []
    for line in path.read_text().splitlines():
        if not (match := PIN.match(line)):
            continue
        name, version = normalise(match.group(1)), match.group(2)
        if "--hash=sha256:" not in line:
            problems.append(f"{path.name}: {name}=={version} carries no hash; {FIX}")
        if name in lock and lock[name] != version:
            problems.append(
                f"{path.name}: {name}=={version} but requirements.lock has {name}=={lock[name]}; "
                f"{FIX}"
            )
    if "torch" not in pins(path):
        problems.append(f"{path.name} pins no torch; {FIX}")
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = stale_pins(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print("requirements.lock matches every pin pyproject.toml declares")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
