"""How many CPU threads torch uses in a run: chosen, not left to torch's default.

torch starts one thread per core it sees, whatever else runs there: two training
processes on two cores, or a busy machine, then fight over them (a loaded 2-core box ran
the default model at 3 steps/s with two threads and 26 with one). Results also differ
in the last bits between thread counts, so a run is bitwise reproducible for a fixed
thread count and device: the header of every run prints the count used.
"""

import os
from dataclasses import dataclass

import torch

from ..cli.errors import UserError

AUTO = "auto"
# Who decides how many processes share this machine's cores, in the order asked.
LOCAL_PROCESS_VARS = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")


@dataclass(frozen=True)
class Threads:
    count: int
    reason: str  # why this count, e.g. "auto: 2 cores / 1 process"

    def __str__(self) -> str:
        return f"{self.count} ({self.reason})"


def choose_threads(setting: object, devices: object = None) -> Threads:
    """The thread count for ``threads: auto|N`` of a run using ``devices`` (trainer.devices).

    ``auto`` keeps ``OMP_NUM_THREADS`` when it is set (make test, torchrun with several
    processes), else divides the cores this process may run on among the processes of
    this machine.
    """
    if setting is None or setting == AUTO:
        if os.environ.get("OMP_NUM_THREADS", "").isdigit():
            count = max(1, int(os.environ["OMP_NUM_THREADS"]))
            return Threads(count, f"auto: OMP_NUM_THREADS={count}")
        cores = available_cores()
        processes = local_processes(devices)
        plural = "es" if processes > 1 else ""
        return Threads(
            max(1, cores // processes), f"auto: {cores} cores / {processes} process{plural}"
        )
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return Threads(setting, "threads=" + str(setting))
    raise UserError(
        f"threads={setting!r}: must be auto or a whole number >= 1; e.g. threads=1, or "
        "threads=auto for the cores available per process"
    )


def apply_threads(threads: Threads) -> None:
    torch.set_num_threads(threads.count)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and SLURM set)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_processes(devices: object = None) -> int:
    """Training processes on this machine: from the launcher, else ``trainer.devices``."""
    for name in LOCAL_PROCESS_VARS:
        value = os.environ.get(name, "").split("(")[0]  # SLURM may write "2(x3)"
        if value.isdigit() and int(value) > 0:
            return int(value)
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > 1:
        return devices
    return 1
