"""Requeue a SLURM job that nears its time limit, so it continues where it stopped.

``scripts/slurm.sbatch`` asks SLURM for ``SIGUSR1`` two minutes before the time limit
(``--signal=USR1@120``) and allows requeueing (``--requeue``). On that signal every task
stops the way SIGTERM stops it (after the current step, saving ``last.ckpt``, exit 0); then
rank 0 runs ``scontrol requeue <job id>``. The requeued job keeps its job id, so it starts
in the same run directory (``outputs/train/runs/slurm-<job id>/``) and the script resumes
from its ``last.ckpt``.

A plain SIGTERM (``scancel``, pre-emption) saves and exits without requeueing: a job the
user cancels stays cancelled. Lightning's own SLURM auto-requeue (which writes
``hpc_ckpt_N.ckpt`` on the same signal) is turned off, so there is one mechanism.
"""

import logging
import os
import shutil
import signal
import subprocess
from types import FrameType

from lightning.pytorch.plugins.environments import SLURMEnvironment

log = logging.getLogger(__name__)

REQUEUE_SIGNAL = signal.SIGUSR1
_asked = False  # whether the requeue signal arrived in this process


def under_slurm() -> bool:
    """Whether this process is a task of a SLURM batch job Lightning treats as one."""
    return "SLURM_JOB_ID" in os.environ and SLURMEnvironment.detect()


def cluster_plugins() -> list[SLURMEnvironment]:
    """The Trainer plugins for this cluster: SLURM without Lightning's auto-requeue."""
    return [SLURMEnvironment(auto_requeue=False)] if under_slurm() else []


def job_id() -> str:
    """The id ``scontrol requeue`` takes: ``<array job>_<task>`` in a job array."""
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    if array is not None and "SLURM_ARRAY_TASK_ID" in os.environ:
        return f"{array}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ["SLURM_JOB_ID"]


def _stop_for_requeue(signum: int, frame: FrameType | None) -> None:
    global _asked
    _asked = True
    os.kill(os.getpid(), signal.SIGTERM)  # stop as on SIGTERM: after this step, saving


def arm_requeue() -> None:
    """Under SLURM: on ``REQUEUE_SIGNAL`` stop and save as on SIGTERM, and remember it."""
    global _asked
    _asked = False
    if under_slurm():
        signal.signal(REQUEUE_SIGNAL, _stop_for_requeue)


def requeue_if_asked() -> bool:
    """After a stop that saved ``last.ckpt``: requeue the job if the requeue signal came.

    Only rank 0 (``SLURM_PROCID=0``) asks; returns whether it did and ``scontrol`` agreed.
    """
    if not _asked or os.environ.get("SLURM_PROCID", "0") != "0":
        return False
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        log.warning("cannot requeue SLURM job %s: scontrol is not on PATH", job_id())
        return False
    result = subprocess.run(
        [scontrol, "requeue", job_id()], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        log.warning("scontrol requeue %s failed: %s", job_id(), result.stderr.strip())
        return False
    log.warning("requeued SLURM job %s; it resumes from its last.ckpt", job_id())
    return True
