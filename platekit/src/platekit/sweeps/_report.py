"""The sweep's result: the best trial on the console and in ``<study dir>/best.json``."""

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from optuna import Study
from optuna.trial import TrialState

from platekit._files import write_json

log = logging.getLogger(__name__)


def show_value(value: float | None) -> str:
    """A metric for people: 4 decimals (small values in 3 significant digits)."""
    if value is None:
        return "-"
    return format(value, ".3g" if 0 < abs(value) < 1e-3 else ".4f")


def show_param(value: Any) -> str:
    """A parameter for people: floats in 4 significant digits."""
    return format(value, ".4g") if isinstance(value, float) else str(value)


def show_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{key}={show_param(value)}" for key, value in params.items())


def tidy(value: float) -> float:
    """A float32 metric read as float64, less its noise: 0.9740740656852722 -> 0.974074."""
    return float(f"{value:.6g}")


def summarize(study: Study, metric: str, study_dir: Path, storage: str) -> dict[str, Any]:
    """The study's counts and best trial as data (``best`` is None before any completes)."""
    trials = study.get_trials(deepcopy=False)
    states = Counter(trial.state.name.lower() for trial in trials)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    best = None
    if complete:
        trial = study.best_trial
        best = {
            "trial": trial.number,
            "value": tidy(study.best_value),
            "params": trial.params,
            "run_dir": trial.user_attrs.get("run_dir"),
        }
    return {
        "study": study.study_name,
        "storage": storage,
        "study_dir": str(study_dir),
        "metric": metric,
        "direction": study.direction.name.lower(),
        "trials": {
            state: states.get(state, 0) for state in ("complete", "pruned", "fail", "running")
        },
        "best": best,
    }


def report(summary: dict[str, Any], study_dir: Path) -> Path:
    """Log the summary and write it to ``<study_dir>/best.json``; return that path."""
    path = study_dir / "best.json"
    write_json(path, summary)
    counts = summary["trials"]
    log.info(
        "study %s: %d complete, %d pruned, %d failed, %d running (%s)",
        summary["study"], counts["complete"], counts["pruned"], counts["fail"],
        counts["running"], summary["storage"],
    )  # fmt: skip
    best = summary["best"]
    if best is None:
        log.info("no trial has completed yet")
    else:
        log.info(
            "best trial %d: %s %s", best["trial"], summary["metric"], show_value(best["value"])
        )
        width = max(map(len, best["params"]), default=0)
        for key, value in best["params"].items():
            log.info("  %-*s  %s", width, key, show_param(value))
        log.info("run directory: %s", best["run_dir"])
    log.info("results: %s", path)
    return path
