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

from platekit._errors import UserError
from platekit._files import format_bytes

READER = 3.0  # bytes held per byte of CSV at the peak of reading, encoding and setting up,
# for tables of short numbers and a few categories (tools/bench_tables.py: 1.3x for
# 3,000,000 rows of 12 numbers, 2.9x for 1,000,000 rows of 4 numbers and 3 category columns);
# a table whose categories make its features wider is checked again once they are known
FEATURE_BYTES = 4  # float32
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_depth = 0  # return_freed_memory's nesting


def limits() -> list[tuple[int, str, bool]]:
    """What this process may still allocate under each limit that applies: ``(bytes, which
    limit, whether it is shared by the machine's processes)``."""
    found: list[tuple[int, str, bool]] = []
    cgroup = Path("/sys/fs/cgroup")
    try:
        maximum = (cgroup / "memory.max").read_text().strip()
        if maximum != "max":
            used = int((cgroup / "memory.current").read_text())
            found.append((int(maximum) - used, "the cgroup's memory limit", True))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:  # each process's own
        found.append((soft - address_space(), "RLIMIT_AS (ulimit -v)", False))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "the memory available", True))
    except (OSError, ValueError, IndexError):
        pass
    return found


def shortfall(each: int) -> str | None:
    """What the first limit a need of ``each`` bytes in every training process on this
    machine breaks says (``"<the limit> leaves <bytes>"``); None if every one holds. A
    machine-wide limit counts every process's need, ``RLIMIT_AS`` this process's."""
    processes = processes_here()
    for room, name, shared in limits():
        if (each * processes if shared else each) > room:
            return f"{name} leaves {format_bytes(max(room, 0))}"
    return None


def in_processes(each: int) -> str:
    """`` in each of N processes (T in all)`` under DDP, else ''."""
    processes = processes_here()
    if processes == 1:
        return ""
    return f" in each of {processes} processes ({format_bytes(each * processes)} in all)"


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
    """Refuse, in one line, a table whose reading cannot fit in the memory this process may
    use (``per_byte``: bytes held per byte of the file)."""
    try:
        size = path.stat().st_size
    except OSError:
        return  # the reader names a missing file
    each = int(size * per_byte)
    if (short := shortfall(each)) is not None:
        raise UserError(
            f"table {path} ({format_bytes(size)}) needs about {format_bytes(each)} to read"
            f"{in_processes(each)}, but {short}; use a machine or limit with more memory, "
            "fewer processes per machine, or a smaller table"
        )


def check_features(path: Path, rows: int, features: int) -> None:
    """Refuse, in one line, a table whose encoded features (``rows`` x ``features`` float32,
    its category columns one feature per value) cannot fit in the memory left: checked after
    reading, before they are made."""
    each = rows * features * FEATURE_BYTES
    if (short := shortfall(each)) is not None:
        raise UserError(
            f"table {path} encodes as {rows:,} rows x {features:,} features "
            f"({format_bytes(each)}{in_processes(each)}), but {short}; leave out wide "
            "category columns (data.features=[...]), or use more memory"
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
