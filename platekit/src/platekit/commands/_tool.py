"""``platekit``: the support package's own command line, run inside a baked project.

    platekit eject <name>            copy a module of platekit into the project (commands/_eject.py)
    python -m platekit eject <name>  the same, without the console script

Errors a user can fix are one line on stderr and exit status 1.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from platekit import __version__
from platekit._errors import UserError
from platekit.commands._eject import EXAMPLES, eject

EJECT = """\
Copy one module of platekit into this project's package, at the same relative path, and make
the project use the copy: its relative imports become absolute platekit imports, every
_target_ in configs/ naming one of its classes names the copy's, and every import of it in
src/<package>/ (a command's file, such as export.py) imports the copy. Nothing is written
if the copy exists already, the name is unknown, or no project is found.

examples:
  platekit eject commands.export       the export command's body, for src/<package>/export.py
  platekit eject models.schedules      the lr schedules that configs/scheduler/ names
  platekit eject CsvDataModule         the module defining a class (data.csv)
"""


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="platekit", description="The machinery under a torchplate project."
    )
    main.add_argument("--version", action="version", version=f"platekit {__version__}")
    commands = main.add_subparsers(dest="command", required=True, metavar="command")
    command = commands.add_parser(
        "eject",
        help="copy a module of platekit into the project, which then uses its copy",
        description=EJECT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("name", help=f"a module or class of platekit: {EXAMPLES}")
    return main


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``platekit <command>``; the exit status."""
    args = parser().parse_args(argv)
    try:
        written = eject(args.name, Path.cwd())
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"ejected {args.name}:")
    for line in written:
        print(f"  {line}")
    print("The project uses its copy now; platekit upgrades no longer change it.")
    return 0
