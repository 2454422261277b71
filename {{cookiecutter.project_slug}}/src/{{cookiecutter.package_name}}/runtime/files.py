"""File writes that never leave a half-written file behind.

A write goes to ``.<name>.<pid>@<host>.<random>.tmp`` beside the file, then is renamed over
it. A writer killed mid-write (SIGKILL, out of memory) leaves its temporary behind; the
next run in that directory removes the ones whose writer is dead
(``remove_stale_temporaries``).
"""

import json
import os
import re
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"
# .<name>.<pid>@<host>.<random>.tmp: pid, host and mkstemp's random part hold no dots.
_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)@(?P<host>[A-Za-z0-9-]*)\.[^.]+\.tmp")


def _host() -> str:
    """This machine's name with anything but letters, digits and ``-`` replaced by ``-``."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())


def writer_tag() -> str:
    """``<pid>@<host>``: who writes a temporary file, so a later run can tell if it died."""
    return f"{os.getpid()}@{_host()}"


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (a zombie counts as alive)."""
    if pid <= 0:
        return True  # not a writer's pid; never treat it as dead
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete the temporaries under ``directory`` whose writer was on this host and is dead.

    A live writer's temporary, another host's (its pid means nothing here) and any file
    not named by ``write_atomic`` are left alone. Returns the removed paths.
    """
    removed = []
    host = _host()
    for tmp in sorted(directory.rglob(f".*{TEMP_SUFFIX}")):
        match = _TEMP_NAME.fullmatch(tmp.name)
        if match and match["host"] == host and not _alive(int(match["pid"])):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


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
    prefix = f".{path.name}.{writer_tag()}."
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=path.parent)
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
