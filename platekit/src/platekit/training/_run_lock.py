"""One run per run directory: a run holds an OS lock on its directory while its process lives.

The lock is ``fcntl.flock`` on ``<run>/.run.lock``, a file holding the holder's pid and host.
The kernel drops it when the process ends however it ends (SIGKILL included), so the file
left behind locks no one out; its existence means nothing. Under DDP the ranks share the
directory and only global rank 0 takes the lock. Locks on network file systems (NFS,
Lustre, ...) may not hold between machines.

Not ``filelock``: its ``flock`` lock records no holder (the refusal names pid and host), and
its soft locks, which record one, are not dropped by the kernel when their process dies.
"""

import fcntl
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from platekit._errors import UserError
from platekit._files import remove_stale_temporaries

LOCK_FILE = ".run.lock"

_held: dict[Path, int] = {}  # run directory -> the open lock file; never closed before exit


def launched_as_global_zero(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is global rank 0 of its run, from the variables launchers set.

    Known when the process starts: torchrun sets ``RANK``; Lightning's own DDP launcher
    re-runs the command for the other ranks with ``LOCAL_RANK`` (and ``NODE_RANK``) set;
    SLURM sets ``SLURM_PROCID``. A process none of them started is rank 0.
    """
    if env.get("RANK"):
        return int(env["RANK"]) == 0
    if int(env.get("LOCAL_RANK") or 0) != 0 or int(env.get("NODE_RANK") or 0) != 0:
        return False
    return int(env.get("SLURM_PROCID") or 0) == 0


def hold_run_lock(run_dir: Path) -> None:
    """Lock ``run_dir`` until this process exits (global rank 0 only), then tidy it.

    Raises UserError, touching nothing, if another live process holds it. The holder then
    removes the temporaries that writers killed mid-write left in the directory.
    """
    key = run_dir.resolve()
    if key in _held or not launched_as_global_zero():
        return
    key.mkdir(parents=True, exist_ok=True)
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        raise UserError(
            f"run directory {run_dir} is in use by the run of {holder}; wait for that run "
            "to end (or stop it), or start this one in another directory (hydra.run.dir=...)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _held[key] = fd
    remove_stale_temporaries(key)


def _read_holder(fd: int) -> str:
    """What the lock file says about its holder (``pid 123 on host``)."""
    for _ in range(20):  # the holder writes its pid just after it takes the lock
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text
        time.sleep(0.05)
    return "a process that has not written its pid yet"
