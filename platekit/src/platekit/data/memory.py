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
from pathlib import Path

from ..cli.errors import UserError
from ..runtime.files import format_bytes

READER = 7.0  # bytes held per byte of CSV at the peak of reading, encoding and setting up:
# measured 6.4x for 1,000,000 rows of short numbers and categories (one-hot columns make the
# encoded features 1.3x the file, held raw and normalised), 2.2x for 3,000,000 rows of plain
# numbers (tools/bench_tables.py)


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


def out_of_memory(path: Path) -> UserError:
    """The one line for a ``MemoryError`` met while reading ``path``."""
    return UserError(
        f"reading table {path} ran out of memory; use a machine or limit with more memory, "
        "fewer processes per machine, or a smaller table"
    )
