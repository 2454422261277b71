"""File writes that never leave a half-written file behind."""

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``.

    A crash or kill mid-write leaves the previous ``path`` (if any) intact.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with tmp.open("rb+") as handle:  # on disk before the rename makes it visible
            os.fsync(handle.fileno())
        tmp.chmod(_file_mode())  # mkstemp makes files private (0o600)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_atomic(path, lambda tmp: tmp.write_text(text))
