"""How long this process has run: the clock a run's wall time is read on.

A run's wall time counts from the moment its process started, so the interpreter's
start-up and every import are in it (``python -m <package>.train`` spends seconds there
before the recipe's first line). On Linux the kernel records each process's start time:
``/proc/self/stat`` gives it in clock ticks since boot and ``/proc/uptime`` the time since
boot, both on the same clock, to 10 ms. Elsewhere (or if ``/proc`` reads inconsistently,
as in some containers) the clock starts when platekit was first imported, which misses
the interpreter's own start and the imports before it; ``process_clock_source`` says which.
"""

import os
import time

_IMPORTED = time.perf_counter()  # the fallback origin: platekit's first import
_first_run_claimed = False


def seconds_since_process_start() -> float:
    """Seconds since this process started (kernel figure), else since platekit's import."""
    since_import = time.perf_counter() - _IMPORTED
    kernel = _kernel_process_age()
    return kernel if kernel is not None and kernel >= since_import else since_import


def process_clock_source() -> str:
    """``process start`` when the kernel's figure is used, else ``platekit import``."""
    kernel = _kernel_process_age()
    usable = kernel is not None and kernel >= time.perf_counter() - _IMPORTED
    return "process start" if usable else "platekit import"


def run_origin() -> float:
    """The ``time.perf_counter()`` value a run's wall time counts from.

    The first run in a process counts from the process's start: its imports and config
    are part of what the user waited for. A later run in the same process (a sweep's next
    trial, a test) paid none of that and counts from this call.
    """
    global _first_run_claimed
    now = time.perf_counter()
    if _first_run_claimed:
        return now
    _first_run_claimed = True
    return now - seconds_since_process_start()


def _kernel_process_age() -> float | None:
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # The command name (field 2) may hold spaces: count fields after its ')'.
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None
    age = since_boot - started
    return age if age >= 0 else None
