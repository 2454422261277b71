"""Search hyperparameters with Optuna: parallel workers on one shared, resumable study.

python -m <package>.sweep                                   # hparams_search=optuna, 1 worker
python -m <package>.sweep sweep.workers=2 sweep.n_trials=40
python -m <package>.sweep data.batch_size=64 trainer.max_epochs=5   # fixed for every trial
python -m <package>.sweep sweep.storage=journal             # a file many machines can share
python -m <package>.sweep sweep.workers=0                   # only create or show the study

Arguments are Hydra overrides of the train config; the search space and the sweep's
settings are in configs/hparams_search/optuna.yaml. The study lives in
outputs/<task_name>/sweeps/<study>/ beside one run directory per trial (trial_<n>/) and
best.json. The same command again resumes the study; on more machines it adds workers.
"""

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import optuna
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig
from optuna.exceptions import ExperimentalWarning
from optuna.pruners import BasePruner, NopPruner
from optuna.storages import BaseStorage
from sqlalchemy.exc import SQLAlchemyError

from platekit._errors import UserError
from platekit._project import current
from platekit.commands._entry import DEBUG_ENV
from platekit.sweeps._config import (
    Direction,
    SweepSettings,
    check_keys,
    check_one_process,
    compose_train,
    fixed_on_command_line,
    quoted_ranges,
    settings_of,
    trial_overrides,
    with_search,
)
from platekit.sweeps._logs import setup_logging
from platekit.sweeps._report import report, summarize
from platekit.sweeps._space import flat_params, parse_space
from platekit.sweeps._storage import CREATE_ATTEMPTS, describe, open_storage
from platekit.sweeps._worker import TrialPlan, budget_used, work
from platekit.training._hints import first_line

# Not __name__: that is __main__ under python -m, and the console shows the sweep's loggers.
PR_SET_PDEATHSIG = 1  # linux/prctl.h
log = logging.getLogger("platekit.sweep")

OVERRIDES = "overrides"  # study attribute: the overrides its trials were started with


def sweep(argv: list[str]) -> int:
    """Run the sweep the overrides describe; return the exit code (0: budget spent)."""
    if flags := [arg for arg in argv if arg.startswith("-")]:
        raise UserError(f"{flags[0]} is not an option of sweep; pass key=value overrides (--help)")
    overrides = with_search(quoted_ranges(argv))
    cfg = compose_train(overrides)
    settings = settings_of(cfg)
    check_one_process(cfg)
    params = fixed_on_command_line(flat_params(cfg.sweep.params), overrides)
    check_keys(cfg, list(params), overrides)
    plan = TrialPlan(settings, parse_space(params), overrides, sampler_factory(cfg.sweep.sampler))
    # null: never prune (Optuna would pick its median pruner for a missing one).
    pruner = build(cfg.sweep.pruner, "pruner") if cfg.sweep.get("pruner") else NopPruner()
    setup_logging("platekit.sweep", settings.study_dir / "sweep.log")

    if settings.worker is not None:  # one of the processes the command below started
        work(open_study(settings, overrides, pruner, create=False), plan, settings.worker)
        return 0
    study = open_study(settings, overrides, pruner, create=True)  # before any worker starts
    where = describe(settings.storage, settings.study_dir)
    log.info(
        "study %s (%s): n_trials=%d, workers=%d; searching %s",
        settings.study, where, settings.n_trials, settings.workers, ", ".join(params) or "nothing",
    )  # fmt: skip
    if fixed := sorted(set(flat_params(cfg.sweep.params)) - set(params)):
        log.info("fixed by the command line, not searched: %s", ", ".join(fixed))
    if settings.workers == 1:
        work(study, plan, index=0)
    elif settings.workers > 1:
        run_workers(overrides, settings.workers)
    report(summarize(study, settings.metric, settings.study_dir, where), settings.study_dir)
    used, running = budget_used(study.get_trials(deepcopy=False))
    if settings.workers and (used < settings.n_trials or running):
        log.info(
            "%d of %d trials done; run the same command again to continue", used - running,
            settings.n_trials,
        )  # fmt: skip
        return 1
    return 0


def open_study(
    settings: SweepSettings, overrides: list[str], pruner: BasePruner, create: bool
) -> optuna.Study:
    """The study in its storage; ``create`` makes it if new. A study started with other
    trial overrides or another direction is a UserError (name a new study)."""
    storage = open_storage(settings.storage, settings.study_dir, create)
    name, where = settings.study, describe(settings.storage, settings.study_dir)
    if create:
        study = create_or_load(name, storage, settings.direction, pruner)
    else:
        study = optuna.load_study(study_name=name, storage=storage, pruner=pruner)
    wanted = trial_overrides(overrides)
    if create and OVERRIDES not in study.user_attrs:
        study.set_user_attr(OVERRIDES, wanted)
    started_with = study.user_attrs.get(OVERRIDES, wanted)
    if started_with != wanted:
        raise UserError(
            f"study {name} ({where}) was started with overrides {started_with}, not {wanted}; "
            "give the same ones to resume it, or start another study with sweep.study=<name>"
        )
    if study.direction.name.lower() != settings.direction:
        raise UserError(
            f"study {name} ({where}) was started to {study.direction.name.lower()}, not to "
            f"{settings.direction}; keep sweep.direction, or start another with sweep.study=<name>"
        )
    return study


def create_or_load(
    name: str, storage: BaseStorage, direction: Direction, pruner: BasePruner
) -> optuna.Study:
    """Create the study, or load it when another sweep created it at the same moment."""
    for attempt in range(CREATE_ATTEMPTS):
        try:
            return optuna.create_study(
                study_name=name, storage=storage, direction=direction, pruner=pruner,
                load_if_exists=True,
            )  # fmt: skip
        except (optuna.exceptions.DuplicatedStudyError, SQLAlchemyError):
            if attempt == CREATE_ATTEMPTS - 1:
                raise
            time.sleep(0.1 * (attempt + 1))  # the other sweep's insert lands; then load it
    raise AssertionError("unreachable")


def sampler_factory(node: DictConfig | None) -> Callable[[int], optuna.samplers.BaseSampler]:
    """Trial number -> its sampler. A seeded sampler is seeded ``seed + trial number`` so
    workers that start together, or a resumed study, never replay one another's draws,
    and a one-worker sweep is reproducible."""
    if node is None:  # Optuna would pick its own default sampler, unseeded: not reproducible
        raise UserError(
            "sweep.sampler is null; name a sampler, e.g. sweep.sampler._target_="
            "optuna.samplers.TPESampler with sweep.sampler.seed=${seed} (see the config)"
        )
    shared = build(node, "sampler")  # a bad sampler fails here, before any trial
    seed = node.get("seed")
    if seed is None:
        return lambda number: shared
    return lambda number: build(node, "sampler", seed=int(seed) + number)


def build(node: DictConfig, name: str, **kwargs: Any) -> Any:
    """Instantiate ``sweep.<name>``; a bad target or argument is a UserError."""
    try:
        with warnings.catch_warnings():  # the config opts in to experimental arguments knowingly
            warnings.simplefilter("ignore", ExperimentalWarning)  # (constant_liar)
            return instantiate(node, **kwargs)
    except InstantiationException as error:
        raise UserError(f"sweep.{name} cannot be built: {first_line(error)}") from None


def run_workers(overrides: list[str], count: int) -> list[int]:
    """Start ``count`` worker processes on the study and wait for them; their exit codes."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    command = [sys.executable, "-m", f"{current().package}.sweep", *overrides]
    workers = [
        subprocess.Popen(
            [*command, f"++sweep.worker={index}"],
            env=worker_env(index, count, gpus),
            preexec_fn=die_with_parent,
        )
        for index in range(count)
    ]
    forward = signal.signal(signal.SIGTERM, lambda signum, frame: _signal_all(workers, signum))
    try:
        codes = [_wait(worker) for worker in workers]
    finally:
        signal.signal(signal.SIGTERM, forward)
    for index, code in enumerate(codes):
        if code != 0:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
            log.warning("worker %d ended with %s; a trial it was running is made up", index, how)
    return codes


def die_with_parent() -> None:
    """In a worker, before it runs: SIGTERM when the sweep process dies (even by kill -9).

    SIGTERM makes the worker mark its running trial failed and stop, as on Ctrl-C.
    Linux only (prctl); elsewhere a worker ends at its trial's end as before.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def worker_env(index: int, count: int, gpus: int) -> dict[str, str]:
    """A worker's environment: its share of CPU threads and, with several GPUs, one of them."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // count)))
    if gpus > 1 and "CUDA_VISIBLE_DEVICES" not in env:
        env["CUDA_VISIBLE_DEVICES"] = str(index % gpus)
    return env


def _wait(worker: subprocess.Popen[bytes]) -> int:
    while True:
        try:
            return worker.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the workers too: let them finish telling
            continue


def _signal_all(workers: list[subprocess.Popen[bytes]], signum: int) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signum)


def main() -> None:
    argv = sys.argv[1:]
    if {"-h", "--help"} & set(argv):
        print(__doc__.replace("<package>", current().package))
        return
    try:
        code = sweep(argv)
    except UserError as error:
        if os.environ.get(DEBUG_ENV):
            raise
        log.error("error: %s", error)
        code = 1
    except KeyboardInterrupt:
        log.error("interrupted; the running trial is marked FAIL; run the same command to resume")
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
