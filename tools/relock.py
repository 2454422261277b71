"""Rewrite the baked project's requirements.lock, a Jinja file with one branch per logger.

Bakes the template once per logger that adds packages, runs the baked ``make lock`` resolver
(``scripts/lock.py``) in each, and merges the results: a pin every bake shares is a plain
line, a pin only some loggers pull in is guarded by ``{% if %}``. Each rendered branch then
equals ``make lock`` in a project baked with that logger. Run with ``make lock``.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
LOCK = TEMPLATE / "{{cookiecutter.project_slug}}" / "requirements.lock"
BASE = "csv"
EXTRA = ["wandb", "mlflow"]  # the loggers that add packages
NOTE = (
    "{#- Rendered per answer: a guarded line is a pin only the wandb or mlflow logger pulls in.\n"
    "    Each branch equals `make lock` in a project baked with that logger; tools/relock.py\n"
    "    writes this file. -#}"
)


def locked(logger: str, scratch: Path) -> list[str]:
    """The lines ``make lock`` writes in a project baked with ``logger``."""
    project = Path(
        cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(scratch / logger),
                     extra_context={"logger": logger})
    )  # fmt: skip
    subprocess.run([sys.executable, "scripts/lock.py"], cwd=project, check=True)
    return (project / "requirements.lock").read_text().splitlines()


def guard(loggers: list[str]) -> str:
    if len(loggers) == 1:
        return f'{{%- if cookiecutter.logger == "{loggers[0]}" %}}'
    listed = ", ".join(f'"{name}"' for name in loggers)
    return f"{{%- if cookiecutter.logger in [{listed}] %}}"


def merge(base: list[str], extra: dict[str, list[str]]) -> str:
    header = [line for line in base if line.startswith("#")]
    shared = {line for line in base if not line.startswith("#")}
    every = shared.union(*map(set, extra.values())) - set(header)
    out = [NOTE, *header]
    for pin in sorted(every, key=lambda line: line.split("==")[0]):
        owners = [name for name, lines in extra.items() if pin in lines]
        out += [pin] if pin in shared else [guard(owners), pin, "{%- endif %}"]
    return "\n".join(out) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = locked(BASE, Path(scratch))
        extra = {name: locked(name, Path(scratch)) for name in EXTRA}
    for name, lines in extra.items():
        missing = set(base) - set(lines)
        if missing:
            sys.exit(f"error: logger={name} changes shared pins {sorted(missing)}; pin them")
    LOCK.write_text(merge(base, extra))
    print(f"wrote {LOCK.relative_to(TEMPLATE)}")


if __name__ == "__main__":
    main()
