"""How many CPU threads torch uses in a run: chosen by a fixed rule, never by timing.

torch starts one thread per core it sees. On the small ops of a CPU training step (the
default CNN, a table's MLP) more intra-op threads cost more than they give: on a 2-core
machine the default model ran at 16.8 steps/s with two threads and 50.4 with one
(alternated runs), and `make train` at 1.4-2.7 steps/s with two against 8.8 with one.
So ``threads: auto`` is one thread per training process on the CPU; on a GPU, where the
CPU decodes and collates, the process's share of the cores. A model with large per-step
work on the CPU (a wide net, big batches) may gain from ``threads=N``: set it.

Results differ in the last bits between thread counts, so a run is bitwise reproducible
for a fixed thread count: the count is stored in every checkpoint and a resumed run with
``auto`` takes it; an explicit ``threads=`` (or ``OMP_NUM_THREADS``) that differs wins,
with one warning that bitwise equality with the first run is lost. The header says why.
"""

import logging
import os
from dataclasses import dataclass

import torch

from platekit._errors import UserError

log = logging.getLogger(__name__)

AUTO = "auto"
CHECKPOINT_KEY = "threads"  # the count a run trained with, in every checkpoint
# Who decides how many processes share this machine's cores, in the order asked.
LOCAL_PROCESS_VARS = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")


@dataclass(frozen=True)
class Threads:
    count: int
    reason: str  # why this count, e.g. "auto: 2 cores / 1 process"

    def __str__(self) -> str:
        return f"{self.count} ({self.reason})"


def choose_threads(
    setting: object,
    devices: object = None,
    accelerator: object = "auto",
    resumed: int | None = None,
) -> Threads:
    """The thread count for ``threads: auto|N`` of a run (see the module's docstring).

    Args:
        devices, accelerator: ``trainer.devices`` and ``trainer.accelerator``.
        resumed: the count stored in the checkpoint a run resumes, if any.
    """
    if setting is None or setting == AUTO:
        if os.environ.get("OMP_NUM_THREADS", "").isdigit():
            count = max(1, int(os.environ["OMP_NUM_THREADS"]))
            chosen = Threads(count, f"auto: OMP_NUM_THREADS={count}")
        elif resumed is not None:
            return Threads(resumed, f"auto: the resumed run's {resumed}")
        elif not uses_gpu(accelerator):
            chosen = Threads(1, "auto: 1 per process on CPU, where more cost more than they give")
        else:
            cores = available_cores()
            processes = local_processes(devices)
            plural = "es" if processes > 1 else ""
            chosen = Threads(
                max(1, cores // processes), f"auto: {cores} cores / {processes} process{plural}"
            )
    elif isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        chosen = Threads(setting, "threads=" + str(setting))
    else:
        raise UserError(
            f"threads={setting!r}: must be auto or a whole number >= 1; e.g. threads=1, or "
            "threads=auto for the fastest count on this device"
        )
    if resumed is not None and chosen.count != resumed:
        log.warning(
            "threads %d (%s), but the resumed run trained with %d: the run continues, no "
            "longer bitwise equal to an uninterrupted one",
            chosen.count,
            chosen.reason,
            resumed,
        )
    return chosen


def uses_gpu(accelerator: object) -> bool:
    """Whether ``trainer.accelerator`` trains on a CUDA (or other) device, not the CPU."""
    if accelerator in ("cpu",):
        return False
    if accelerator in (None, "auto"):
        return torch.cuda.is_available()
    return True


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
