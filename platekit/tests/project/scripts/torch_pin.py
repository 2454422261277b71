"""Print requirements.lock's torch line as this Python installs its CPU build.

    python scripts/torch_pin.py > torch.lock     # make setup and the Dockerfile run this

With the lock's hashes where they cover this Python's CPU build; bare (``torch==X``) where
the lock says, in its ``# unhashed:`` line, that it could not learn that build's hash (the
lock was made on another Python and PyTorch's CPU index did not answer `make lock`). make
setup prints that line before installing; `make lock` on a machine that reaches the index
fills it. Standard library only.
"""

import re
import sys
from pathlib import Path


def torch_pin(lock: str, python: str) -> str:
    """The torch line of ``lock`` to install on Python ``python`` (``3.12``)."""
    [line] = [line for line in lock.splitlines() if line.startswith("torch==")]
    made_on = re.search(r"\(Python (\d+\.\d+),", lock)
    if "# unhashed: torch" in lock and made_on is not None and made_on.group(1) != python:
        return line.split(" --hash=", 1)[0]
    return line


if __name__ == "__main__":
    here = Path(__file__).resolve().parents[1] / "requirements.lock"
    lock = Path(sys.argv[1]) if len(sys.argv) > 1 else here
    print(torch_pin(lock.read_text(), f"{sys.version_info[0]}.{sys.version_info[1]}"))
