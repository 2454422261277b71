"""One sweep worker: take trials from the shared study until its budget is spent.

Every trial is an ordinary train run, called in this process (no interpreter and torch
start-up per trial; the pruning callback reports straight to the trial), in its own run
directory ``<study dir>/trial_<n>/``. Workers on one or many machines coordinate through
the study's storage only:

- the budget ``n_trials`` counts trials that are complete, pruned, running or failed by
  their own error; a trial lost with its worker does not count, so it is made up;
- a running trial's worker writes a heartbeat every ``heartbeat_s``; a trial without one
  for ``stale_after_s`` is marked FAIL (its worker was killed) by whichever worker looks next;
- a worker with no budget left waits while trials run elsewhere, in case one is lost.
"""

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import torch
from optuna import Study
from optuna.exceptions import UpdateFinishedTrialError
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, Trial, TrialState

from platekit._errors import UserError
from platekit._project import current
from platekit.sweeps._config import SweepSettings, compose_train
from platekit.sweeps._logs import trial_log
from platekit.sweeps._pruning import PruneBadTrials
from platekit.sweeps._report import show_params, show_value
from platekit.sweeps._space import Param, as_override, suggest
from platekit.training._hints import first_line
from platekit.training._summary import objective

log = logging.getLogger(__name__)
# A trial's tracebacks go to its train.log only (this logger is not shown on the console).
trial_events = logging.getLogger("trial")

HEARTBEAT = "heartbeat"  # user attribute: unix time of the worker's last sign of life
ERROR = "error"  # user attribute: why a trial failed by itself (such a trial counts)
WORKER = "worker"  # user attribute: host:pid of the process running the trial
RUN_DIR = "run_dir"  # user attribute: the trial's run directory
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)


@dataclass(frozen=True)
class TrialPlan:
    """What every trial of this sweep shares."""

    settings: SweepSettings
    space: list[Param]
    overrides: list[str]  # the command line's, applied to every trial
    sampler_for: Callable[[int], BaseSampler]  # trial number -> the sampler that draws it


def work(study: Study, plan: TrialPlan, index: int) -> None:
    """Run trials until ``n_trials`` are spent and none runs anywhere."""
    settings = plan.settings
    while True:
        fail_stale_trials(study, settings.stale_after_s)
        used, running = budget_used(study.get_trials(deepcopy=False))
        if used >= settings.n_trials:
            if running == 0:
                return
            time.sleep(settings.heartbeat_s)  # a trial running elsewhere may yet be lost
            continue
        if not run_trial(study, study.ask(), plan, index):
            return


def budget_used(trials: list[FrozenTrial]) -> tuple[int, int]:
    """How many trials count against ``n_trials``, and how many of them are running."""
    used = sum(t.state in COUNTED or (t.state == TrialState.FAIL and ERROR in t.user_attrs)
               for t in trials)  # fmt: skip
    return used, sum(t.state == TrialState.RUNNING for t in trials)


def fail_stale_trials(study: Study, stale_after_s: float) -> None:
    """Mark FAIL the running trials whose worker has been silent for ``stale_after_s``."""
    now = time.time()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        started = trial.datetime_start.timestamp() if trial.datetime_start else now
        silent_s = now - trial.user_attrs.get(HEARTBEAT, started)
        if silent_s > stale_after_s and finish(study, trial.number, state=TrialState.FAIL):
            log.info(
                "trial %d lost: no heartbeat from %s for %.0f s; marked FAIL, to be run again",
                trial.number, trial.user_attrs.get(WORKER, "its worker"), silent_s,
            )  # fmt: skip


def finish(study: Study, trial: Trial | int, **outcome: Any) -> bool:
    """``study.tell``; False if the trial was already finished (failed as lost meanwhile)."""
    try:
        study.tell(trial, **outcome)
    except UpdateFinishedTrialError:  # another worker finished it a moment ago
        return False
    except ValueError as error:
        if str(error).startswith("Cannot tell a"):  # "Cannot tell a FAIL trial."
            return False
        raise
    return True


def run_trial(study: Study, trial: Trial, plan: TrialPlan, index: int) -> bool:
    """Train one trial and tell the study how it went; False when the worker must stop."""
    settings = plan.settings
    study.sampler = plan.sampler_for(trial.number)  # before the first suggest draws from it
    params = {param.key: suggest(trial, param) for param in plan.space}
    run_dir = settings.study_dir / f"trial_{trial.number}"
    trial.set_user_attr(WORKER, f"{socket.gethostname()}:{os.getpid()}")
    trial.set_user_attr(RUN_DIR, str(run_dir))
    log.info("trial %d started (worker %d): %s", trial.number, index, show_params(params))
    started = time.perf_counter()
    pruning = PruneBadTrials(trial, settings.metric)
    try:
        with heartbeat(trial, settings.heartbeat_s), trial_log(run_dir):
            try:
                train = import_module(f"{current().package}.train").train  # the project's recipe
                metrics = train(_trial_config(plan, params, run_dir), callbacks=[pruning])
                value = None if "stopped" in metrics else objective(metrics, settings.metric)
            except Exception:
                trial_events.warning("trial %d failed", trial.number, exc_info=True)
                raise
    except UserError as error:  # the same mistake would fail every trial: stop
        trial.set_user_attr(ERROR, str(error))
        finish(study, trial, state=TrialState.FAIL)
        raise
    except Exception as error:  # e.g. out of memory at this batch size: a bad trial
        trial.set_user_attr(ERROR, first_line(error))
        finish(study, trial, state=TrialState.FAIL)
        log.info(
            "trial %d failed: %s (see %s)", trial.number, first_line(error), run_dir / "train.log"
        )
        return True
    except BaseException:  # Ctrl-C, exit: the trial is lost, not bad
        finish(study, trial, state=TrialState.FAIL)
        raise
    finally:
        _release_memory()
    seconds = time.perf_counter() - started
    if value is None:  # SIGTERM (pre-emption): lost, to be run again; this worker stops
        finish(study, trial, state=TrialState.FAIL)
        log.info("trial %d stopped by SIGTERM; marked FAIL, to be run again", trial.number)
        return False
    if pruning.pruned_epoch is not None:
        told = finish(study, trial, state=TrialState.PRUNED)
        outcome = f"pruned after epoch {pruning.pruned_epoch}"
    else:
        told = finish(study, trial, values=value)
        outcome = "finished"
    if not told:
        log.info(
            "trial %d was marked lost while this worker was silent; result dropped", trial.number
        )
    else:
        log.info(
            "trial %d %s: %s %s in %.1f s", trial.number, outcome, settings.metric,
            show_value(value), seconds,
        )  # fmt: skip
    return True


def _trial_config(plan: TrialPlan, params: dict[str, Any], run_dir: Path) -> Any:
    searched = [as_override(key, value) for key, value in params.items()]
    return compose_train([*plan.overrides, *searched, f"paths.output_dir={run_dir}"])


@contextmanager
def heartbeat(trial: Trial, every_s: float) -> Iterator[None]:
    """Write the time into the trial every ``every_s`` while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                trial.set_user_attr(HEARTBEAT, time.time())
            except Exception:  # storage busy, or the trial was failed as lost: try again
                log.debug("heartbeat of trial %d not written", trial.number, exc_info=True)

    trial.set_user_attr(HEARTBEAT, time.time())
    thread = threading.Thread(target=beat, name=f"heartbeat-trial-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
