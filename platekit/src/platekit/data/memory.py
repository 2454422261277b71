"""Will a table fit? The memory reading it needs, against what this process may use.

Before a table is read, its size times what reading and setting it up holds per byte at the
peak (``READER``, measured), times the processes
this machine runs (DDP ranks each read it), is compared with the least of: the cgroup's limit
less its use, ``RLIMIT_AS`` less this process's address space, and the kernel's
``MemAvailable``. A table that cannot fit is refused in one line before anything is read,
instead of a kernel kill with no message or a ``MemoryError`` traceback.
"""

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from ..cli.errors import UserError
from ..runtime.files import format_bytes

READER = 3.0  # bytes held per byte of CSV at the peak of reading, encoding and setting up,
# for tables of short numbers and a few categories (tools/bench_tables.py: 1.3x for
# 3,000,000 rows of 12 numbers, 2.9x for 1,000,000 rows of 4 numbers and 3 category columns);
# a table whose categories make its features wider is checked again once they are known
FEATURE_BYTES = 4  # float32
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_depth = 0  # return_freed_memory's nesting


def available_bytes() -> tuple[int, str] | None:
    """The bytes this process may still allocate, and which limit says so; None if unknown."""
    limits: list[tuple[int, str]] = []
    cgroup = Path("/sys/fs/cgroup")
    try:
        maximum = (cgroup / "memory.max").read_text().strip()
        if maximum != "max":
            used = int((cgroup / "memory.current").read_text())
            limits.append((int(maximum) - used, "the cgroup's memory limit"))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append((soft - address_space(), "RLIMIT_AS (ulimit -v)"))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append((int(line.split()[1]) * 1024, "the memory available"))
    except (OSError, ValueError, IndexError):
        pass
    return min(limits) if limits else None


def address_space() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def processes_here() -> int:
    """The training processes on this machine, each of which reads the table."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def check_memory(path: Path, per_byte: float = READER) -> None:
    """Refuse, in one line, a table whose reading cannot fit in the memory this process may use."""
    try:
        size = path.stat().st_size
    except OSError:
        return  # the reader names a missing file
    processes = processes_here()
    need = int(size * per_byte * processes)
    room = available_bytes()
    if room is None or need <= room[0]:
        return
    each = f" in each of {processes} processes" if processes > 1 else ""
    raise UserError(
        f"table {path} ({format_bytes(size)}) needs about {format_bytes(need)} to read"
        f"{each}, but {room[1]} leaves {format_bytes(max(room[0], 0))}; use a machine or "
        "limit with more memory, fewer processes per machine, or a smaller table"
    )


def check_features(path: Path, rows: int, features: int) -> None:
    """Refuse, in one line, a table whose encoded features (``rows`` x ``features`` float32,
    its category columns one feature per value) cannot fit in the memory left: checked after
    reading, before they are made."""
    processes = processes_here()
    need = rows * features * FEATURE_BYTES * processes
    room = available_bytes()
    if room is None or need <= room[0]:
        return
    each = f" in each of {processes} processes" if processes > 1 else ""
    raise UserError(
        f"table {path} encodes as {rows:,} rows x {features:,} features "
        f"({format_bytes(need)}{each}), but {room[1]} leaves {format_bytes(max(room[0], 0))}; "
        "leave out wide category columns (data.features=[...]), or use more memory"
    )


def out_of_memory(path: Path) -> UserError:
    """The one line for a ``MemoryError`` met while reading ``path``."""
    return UserError(
        f"reading table {path} ran out of memory; use a machine or limit with more memory, "
        "fewer processes per machine, or a smaller table"
    )


@contextmanager
def return_freed_memory() -> Iterator[None]:
    """While reading and setting up data, have glibc's malloc serve blocks of 64 KiB and more
    from the kernel and give them back when freed: by default the threshold rises as blocks
    are freed, and freed blocks stay in the heap between one temporary and the next
    (measured: 869 MiB peak reading the 3,000,000-row benchmark table, 511 MiB with this).
    Afterwards the threshold is glibc's highest (32 MiB), where its own adjustment would
    have taken it, so training's batches are not each mapped and unmapped, and what the heap
    holds free is given back. Nested uses are one; a no-op where the C library is not glibc."""
    global _depth
    libc = glibc()
    if libc is not None and _depth == 0:
        libc.mallopt(M_MMAP_THRESHOLD, 64 << 10)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if libc is not None and _depth == 0:
            libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
            libc.malloc_trim(0)


@cache
def glibc() -> Any:
    """The C library, if it is glibc (it has ``mallopt`` and ``malloc_trim``); else None."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc's, absent elsewhere
    except (OSError, AttributeError):
        return None
    return libc
