"""File writes that never leave a half-written file behind, and strict JSON."""

import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cli.errors import UserError

NO_SPACE = {errno.ENOSPC: "no space left on its disk", errno.EDQUOT: "disk quota exceeded"}


def _file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, write: Callable[[Path], None], *, size: int | None = None) -> None:
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
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        write(tmp)
        with tmp.open("rb+") as handle:  # on disk before the rename makes it visible
            os.fsync(handle.fileno())
        tmp.chmod(_file_mode())  # mkstemp makes files private (0o600)
        os.replace(tmp, path)
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise
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
        f"cannot write '{path}': {NO_SPACE[error.errno]} ({needed}); any previous "
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
