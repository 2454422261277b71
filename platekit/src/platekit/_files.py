"""File writes that never leave a half-written file behind, and strict JSON.

A write goes to ``.<name>.<pid>@<host>.<random>.tmp`` beside the file, then is renamed over
it. A writer killed mid-write (SIGKILL, out of memory) leaves its temporary behind; the
next run in that directory removes the ones whose writer is dead
(``remove_stale_temporaries``). A full disk is one line naming the file and the space.
"""

import errno
import glob
import json
import math
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from platekit._errors import UserError, first_line

NO_SPACE = {errno.ENOSPC: "no space left on its disk", errno.EDQUOT: "disk quota exceeded"}

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


def remove_stale_temporaries(directory: Path, pattern: str = f"**/.*{TEMP_SUFFIX}") -> list[Path]:
    """Delete the temporaries under ``directory`` whose writer was on this host and is dead.

    A live writer's temporary, another host's (its pid means nothing here) and any file
    not named by ``write_atomic`` are left alone. Returns the removed paths.
    """
    removed = []
    host = _host()
    for tmp in sorted(directory.glob(pattern)):
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


def write_atomic(path: Path, write: Callable[[Path], object], *, size: int | None = None) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``.

    A crash, kill or full disk mid-write leaves the previous ``path`` (if any) intact and no
    temporary file behind. ``size``: about how many bytes ``write`` writes, for the message.

    Raises:
        UserError: the disk is full or the quota exceeded (ENOSPC, EDQUOT), naming ``path``,
            the space needed and the space free.
    """
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A writer of this file killed before (kill -9 mid-export) left its temporary here.
        remove_stale_temporaries(path.parent, f".{glob.escape(path.name)}.*{TEMP_SUFFIX}")
        prefix = f".{path.name}.{writer_tag()}."
        fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        write(tmp)
        with tmp.open("rb+") as handle:  # on disk before the rename makes it visible
            os.fsync(handle.fileno())
        tmp.chmod(_file_mode())  # mkstemp makes files private (0o600)
        os.replace(tmp, path)
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise UserError(
                f"cannot write '{path}' ({error.strerror or first_line(error)}); choose a "
                "folder this user may write (e.g. another output_path or paths.root_dir)"
            ) from None
        written = _size_of(tmp)
        if tmp is not None:
            tmp.unlink(missing_ok=True)  # before measuring what is free
        raise UserError(_no_space_message(path, error, size, written)) from error
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def json_text(data: Any, *, sort_keys: bool = True) -> str:
    """``data`` as indented, strict JSON (RFC 8259): NaN and +-Inf become ``null``.

    Python's json writes NaN/Infinity, which strict parsers (browsers, jq, most languages)
    reject. A non-finite float is a value that does not exist (a diverged metric, an
    undefined ratio), so it is written as null rather than refusing to write the file: a
    finished run keeps its record. Anything else json cannot encode still raises.
    """
    return json.dumps(_finite_or_null(data), indent=2, sort_keys=sort_keys, allow_nan=False) + "\n"


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as strict JSON (see ``json_text``), atomically."""
    text = json_text(data)
    write_atomic(path, lambda tmp: tmp.write_text(text), size=len(text.encode()))


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(v) for v in value]
    return value


def _size_of(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _no_space_message(path: Path, error: OSError, size: int | None, written: int) -> str:
    reason = NO_SPACE.get(error.errno or 0, error.strerror)
    try:
        free = format_bytes(shutil.disk_usage(_existing_parent(path)).free) + " free"
    except OSError:
        free = "free space unknown"
    if size:
        needed = f"needs about {format_bytes(size)}, {free}"
    elif written:
        needed = f"{format_bytes(written)} written when it ran out, {free}"
    else:
        needed = free
    return (
        f"cannot write '{path}': {reason} ({needed}); any previous "
        "file is left as it was. Free some space, or write elsewhere (e.g. paths.output_dir=...)"
    )


def _existing_parent(path: Path) -> Path:
    for folder in path.parents:
        if folder.exists():
            return folder
    return Path.cwd()


def format_bytes(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
