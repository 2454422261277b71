"""Rewrite the baked project's requirements.lock, a Jinja file with one branch per answer.

Bakes the template once per answer that adds packages (the wandb and mlflow loggers,
serve=yes), runs the baked ``make lock`` resolver (``scripts/lock.py``) in each, and merges
the results: a pin every bake shares is a plain line, a pin only some answers pull in is
guarded by ``{% if %}``. Each rendered branch then equals ``make lock`` in a project baked
with that answer. Answers combine (logger=mlflow with serve=yes) because no package gets two
versions: the merge refuses that. requirements-cu130.lock (torch's CUDA build and its CUDA
packages) and scripts/audit.lock (pip-audit, for CI) are one file each for every answer: the
default bake's are copied. Last, requirements-dev.lock, the template's own tools
(requirements-dev.txt) and what they pull in beyond the bake's lock, held to that lock's
versions and hashed by the same resolver. Run with ``make lock``.
"""

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from bake_pins import every_branch
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
LOCK = TEMPLATE / "{{cookiecutter.project_slug}}" / "requirements.lock"
CUDA_LOCK = LOCK.with_name("requirements-cu130.lock")
AUDIT_LOCK = LOCK.parent / "scripts" / "audit.lock"
DEV = TEMPLATE / "requirements-dev.txt"
DEV_LOCK = TEMPLATE / "requirements-dev.lock"
BASE = {"logger": "csv", "serve": "no"}
# The answers that add packages, by name: the loggers' names, and "serve".
EXTRA = {"wandb": {"logger": "wandb"}, "mlflow": {"logger": "mlflow"}, "serve": {"serve": "yes"}}
LOGGERS = ["wandb", "mlflow"]
NOTE = (
    "{#- Rendered per answer: a guarded line is a pin only the wandb or mlflow logger, or\n"
    "    serve=yes, pulls in. Each branch equals `make lock` in a project baked with that\n"
    "    answer; tools/relock.py writes this file. -#}"
)


def locked(name: str, answers: dict[str, str], scratch: Path) -> list[str]:
    """The lines ``make lock`` writes in a project baked with ``answers`` (the default
    answers' CUDA lock is copied into the template)."""
    project = Path(
        cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(scratch / name),
                     extra_context={**BASE, **answers})
    )  # fmt: skip
    print(f"make lock in a bake with {answers or 'the default answers'}:", flush=True)
    subprocess.run([sys.executable, "scripts/lock.py"], cwd=project, check=True)
    if not answers:
        CUDA_LOCK.write_text((project / CUDA_LOCK.name).read_text())
        AUDIT_LOCK.write_text((project / "scripts" / AUDIT_LOCK.name).read_text())
    return (project / "requirements.lock").read_text().splitlines()


def guard(owners: list[str]) -> str:
    """``{%- if ... %}`` true for the bakes of these answers."""
    loggers = [name for name in owners if name in LOGGERS]
    tests = []
    if len(loggers) == 1:
        tests.append(f'cookiecutter.logger == "{loggers[0]}"')
    elif loggers:
        listed = ", ".join(f'"{name}"' for name in loggers)
        tests.append(f"cookiecutter.logger in [{listed}]")
    if "serve" in owners:
        tests.append('cookiecutter.serve == "yes"')
    return f"{{%- if {' or '.join(tests)} %}}"


def is_pin(line: str) -> bool:
    """A ``name==version`` line, not the header's comments or index options (``--find-links``)."""
    return not line.startswith(("#", "-"))


def merge(base: list[str], extra: dict[str, list[str]]) -> str:
    header = [line for line in base if not is_pin(line)]
    shared = {line for line in base if is_pin(line)}
    every = shared.union(*map(set, extra.values())) - set(header)
    out = [NOTE, *header]
    for pin in sorted(every, key=lambda line: line.split("==")[0]):
        owners = [name for name, lines in extra.items() if pin in lines]
        out += [pin] if pin in shared else [guard(owners), pin, "{%- endif %}"]
    return "\n".join(out) + "\n"


def one_version_each(base: list[str], extra: dict[str, list[str]]) -> None:
    """Exit unless every package has one version across all bakes (so answers combine)."""
    versions: dict[str, set[str]] = {}
    for line in [*base, *(pin for lines in extra.values() for pin in lines)]:
        if is_pin(line):
            name, version = line.split("==")
            versions.setdefault(name, set()).add(version)
    clashes = {name: sorted(found) for name, found in versions.items() if len(found) > 1}
    if clashes:
        sys.exit(f"error: the answers lock different versions of {clashes}; pin them")


def dev_lock(project: Path, bake_lock: str, scratch: Path) -> str:
    """requirements-dev.lock's text: the template's tools and what they add to the bake's
    lock (every branch), resolved and hashed by the bake's own ``scripts/lock.py``."""
    spec = importlib.util.spec_from_file_location("bake_lock", project / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    resolver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(resolver)
    bake = {line.split("==")[0]: line.split("==")[1].split()[0]
            for line in bake_lock.splitlines() if is_pin(line) and "==" in line}  # fmt: skip
    held = scratch / "held.txt"
    held.write_text("".join(f"{name}=={version}\n" for name, version in bake.items()
                            if name != "platekit"))  # fmt: skip
    wanted = scratch / "dev.txt"
    wanted.write_text(f"-r {DEV}\n-c {held}\n")
    resolved = resolver.resolve(wanted, DEV_LOCK)
    pins, _ = resolver.hashed({name: pin for name, pin in resolved.items() if name not in bake})
    lines = resolver.render(pins, [], []).splitlines()[3:]  # without the bake lock's header
    header = (
        "# The template's own tools (requirements-dev.txt) and what they pull in beyond the\n"
        "# bake's requirements.lock, held to its versions; each pin with the sha256 of each\n"
        "# file it may be installed from. The template's venv installs both with\n"
        "# --require-hashes (Makefile). Written by `make lock` (tools/relock.py).\n"
    )
    return header + "\n".join(lines) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = locked("base", {}, Path(scratch))
        extra = {name: locked(name, answers, Path(scratch)) for name, answers in EXTRA.items()}
        for name, lines in extra.items():
            missing = set(base) - set(lines)
            if missing:
                sys.exit(f"error: {EXTRA[name]} changes shared pins {sorted(missing)}; pin them")
        one_version_each(base, extra)
        merged = merge(base, extra)
        [project] = (Path(scratch) / "base").iterdir()
        print("the template's tools, held to the bake's lock:", flush=True)
        dev = dev_lock(project, "\n".join(every_branch(merged)), Path(scratch))
    LOCK.write_text(merged)
    DEV_LOCK.write_text(dev)
    print(f"wrote {LOCK.relative_to(TEMPLATE)} and {DEV_LOCK.name}")


if __name__ == "__main__":
    main()
