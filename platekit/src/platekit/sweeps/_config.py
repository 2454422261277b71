"""The sweep's settings (``sweep.*`` of configs/hparams_search/*.yaml) and trial configs."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError
from platekit.config._nodes import config_dir
from platekit.config._resume import run_dir
from platekit.config._rules import MAPPING, choice, integer, null_or, number, passed, target, text
from platekit.config._schema import TASK_NAME, declare
from platekit.config._typos import nearest_names

declare(
    {
        "sweep.study": TASK_NAME,
        "sweep.direction": choice("maximize", "minimize"),
        "sweep.n_trials": integer(1, example=20),
        "sweep.workers": integer(0, example=2),
        "sweep.storage": text("sqlite"),
        "sweep.heartbeat_s": number(above=0.0, example=10),
        "sweep.stale_after_s": number(above=0.0, example=120),
        "sweep.worker": passed("the sweep command (set per worker)"),
        "sweep.sampler": null_or(MAPPING),
        "sweep.sampler._target_": target(),
        "sweep.sampler.**": passed("the Optuna sampler (sweep.sampler._target_)"),
        "sweep.pruner": null_or(MAPPING),
        "sweep.pruner._target_": target(),
        "sweep.pruner.**": passed("the Optuna pruner (sweep.pruner._target_)"),
        "sweep.params.**": passed("the sweep's search space (sweeps/_space.py)"),
    }
)

CONFIG_NAME = "train"
SEARCH_GROUP = "hparams_search"
DEFAULT_SEARCH = "optuna"
# Overrides that tune how a sweep runs, not what its trials train; they may change between
# the commands that join one study.
HOW_TO_RUN = (
    "sweep.workers",
    "sweep.worker",
    "sweep.n_trials",
    "sweep.storage",
    "sweep.heartbeat_s",
    "sweep.stale_after_s",
)
Direction = Literal["maximize", "minimize"]
DIRECTIONS: tuple[Direction, ...] = ("maximize", "minimize")
_ABSENT = object()


@dataclass(frozen=True)
class SweepSettings:
    study: str
    study_dir: Path
    storage: str
    direction: Direction
    metric: str
    n_trials: int
    workers: int
    worker: int | None  # set by the launcher for each process it starts
    heartbeat_s: float
    stale_after_s: float


# ``sweep.params.<key>=<range>`` with the range unquoted: Hydra would read it as a sweep of its
# own (and ask for --multirun); as a value of the search space it is a quoted text.
RANGE_OVERRIDE = re.compile(
    r"(\+{0,2}sweep\.params\.[\w.]+=)((?:tag|interval|int|range|choice)\(.*\))"
)


def quoted_ranges(overrides: list[str]) -> list[str]:
    """``sweep.params.optimizer.lr=interval(1e-4, 0.1)`` as the search range it means."""
    return [
        f"{m[1]}'{m[2]}'" if (m := RANGE_OVERRIDE.fullmatch(o)) and "'" not in m[2] else o
        for o in overrides
    ]


def with_search(overrides: list[str]) -> list[str]:
    """The overrides, with ``hparams_search=optuna`` first unless a search is named."""
    named = any(o.lstrip("+~").startswith(f"{SEARCH_GROUP}=") for o in overrides)
    return overrides if named else [f"{SEARCH_GROUP}={DEFAULT_SEARCH}", *overrides]


def compose_train(overrides: list[str]) -> DictConfig:
    """The train config with ``overrides``; a bad override is a UserError naming it."""
    # train.yaml's hydra.run.dir names this resolver; compose leaves the hydra node unused.
    OmegaConf.register_new_resolver("run_dir", run_dir, replace=True)
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
            return compose(config_name=CONFIG_NAME, overrides=overrides)
    except HydraException as error:
        message = str(error).strip().splitlines()[0]
        hints = _hints(overrides)
        raise UserError(message + (f" ({'; '.join(hints)})" if hints else "")) from None


def _hints(overrides: list[str]) -> list[str]:
    try:
        return nearest_names(config_dir(), CONFIG_NAME, overrides)
    except Exception:  # a hint is a courtesy; never mask the real error
        return []


def settings_of(cfg: DictConfig) -> SweepSettings:
    """The ``sweep`` node checked: every mistake is one UserError line."""
    sweep = cfg.get("sweep")
    if sweep is None:
        raise UserError(
            f"the config has no 'sweep' node; pass a search space such as {SEARCH_GROUP}=optuna "
            "(configs/hparams_search/)"
        )
    study = str(sweep.study)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", study):
        raise UserError(
            f"sweep.study={study} is not a plain name; use letters, digits, '.', '_' or '-'"
        )
    if sweep.direction not in DIRECTIONS:
        raise UserError(f"sweep.direction={sweep.direction} is not one of {list(DIRECTIONS)}")
    if not cfg.get("optimized_metric"):
        raise UserError(
            "optimized_metric is not set; name the metric to optimise, e.g. "
            "optimized_metric=monitor"
        )
    for key in ("n_trials", "workers", "heartbeat_s", "stale_after_s"):
        _positive(key, sweep[key], allow_zero=key == "workers")
    if sweep.stale_after_s <= 2 * sweep.heartbeat_s:
        raise UserError(
            f"sweep.stale_after_s={sweep.stale_after_s} must exceed twice sweep.heartbeat_s="
            f"{sweep.heartbeat_s}, or live trials would be failed as lost"
        )
    return SweepSettings(
        study=study,
        study_dir=Path(cfg.paths.log_dir) / cfg.task_name / "sweeps" / study,
        storage=str(sweep.storage),
        direction=cast(Direction, str(sweep.direction)),  # one of DIRECTIONS: checked above
        metric=str(cfg.optimized_metric),
        n_trials=int(sweep.n_trials),
        workers=int(sweep.workers),
        worker=None if sweep.get("worker") is None else int(sweep.worker),
        heartbeat_s=float(sweep.heartbeat_s),
        stale_after_s=float(sweep.stale_after_s),
    )


def check_one_process(cfg: DictConfig) -> None:
    """A trial trains inside its worker's process: on one device, without DDP, which would
    start the whole sweep again in every rank."""
    trainer = cfg.trainer
    devices, nodes = trainer.get("devices", 1), trainer.get("num_nodes", 1)
    strategy = trainer.get("strategy", "auto")
    if devices != 1 or nodes != 1 or strategy not in (None, "auto"):
        shown = strategy.get("_target_", strategy) if isinstance(strategy, DictConfig) else strategy
        raise UserError(
            f"trainer.devices={devices}, num_nodes={nodes}, strategy={shown}: a sweep trial trains "
            "on one device; use trainer=default, cpu or gpu, and sweep.workers=N (one per GPU) "
            "for trials in parallel"
        )


def _positive(key: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        least = "0 or more" if allow_zero else "a positive number"
        raise UserError(f"sweep.{key}={value} must be {least}")


def fixed_on_command_line(params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """The searched keys, less those an override fixes for every trial (e.g. data.batch_size=64)."""
    given = {_key(o) for o in overrides if "=" in o}
    return {key: text for key, text in params.items() if key not in given}


def check_keys(cfg: DictConfig, keys: list[str], overrides: list[str]) -> None:
    """Every searched key must be a key of the train config."""
    for key in keys:
        if OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT:
            hints = _hints([*overrides, f"{key}=0"])
            near = f" ({hints[-1]})" if hints else ""
            raise UserError(
                f"sweep.params key {key} is not a key of the train config{near}; fix it in "
                f"configs/{SEARCH_GROUP}/ or drop it"
            )


def trial_overrides(overrides: list[str]) -> list[str]:
    """What shapes the trials: the overrides less the sweep's own running knobs."""
    return sorted(o for o in overrides if not _key(o).startswith(HOW_TO_RUN))


def _key(override: str) -> str:
    """``++sweep.worker=1`` -> ``sweep.worker``."""
    return override.split("=", 1)[0].lstrip("+~")
