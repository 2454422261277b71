"""The end-of-run summary: best and final metrics, the test split per class, speed and memory,
as data and a table."""

import resource
import sys
from pathlib import Path
from typing import Any

import torch
from rich.console import Group
from rich.table import Table
from rich.text import Text

from platekit._errors import UserError, inert
from platekit.models._tasks import STAGES
from platekit.training._clock import process_clock_source
from platekit.training._console import as_text
from platekit.training._speed import StepClock

Row = dict[str, float]


def best_row(history: list[Row], monitor: str, mode: str) -> Row | None:
    """The epoch whose ``monitor`` value is best (the first one on ties)."""
    scored = [row for row in history if monitor in row]
    if not scored:
        return None
    pick = max if mode == "max" else min
    return pick(scored, key=lambda row: row[monitor])


def peak_memory_mb() -> dict[str, float | None]:
    """Peak resident host memory of this process and peak CUDA memory allocated by torch."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_bytes = rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB
    cuda = torch.cuda.max_memory_allocated() if torch.cuda.is_initialized() else None
    return {
        "host": round(rss_bytes / 2**20, 1),
        "cuda": None if cuda is None else round(cuda / 2**20, 1),
    }


def summarize(
    history: list[Row],
    speed: StepClock,
    *,
    wall_seconds: float,
    startup_seconds: float,
    imports_seconds: float,
    monitor: str,
    mode: str,
    best_epoch: float | None = None,
) -> dict[str, Any]:
    """What metrics.json adds to the test results: best and final epoch, times, speed, memory.

    Args:
        speed: the run's training steps and seconds (``training/_speed.py`` defines steps/s).
        wall_seconds: from the process's start (``training/_clock.py``) to now.
        startup_seconds: from the process's start to the start of fit.
        imports_seconds: from the process's start to the recipe's first line: the
            interpreter, the imports and the config.
        best_epoch: the epoch of the checkpoint tested, if known: its row is ``best``.
    """
    rate = speed.rate
    return {
        "monitor": monitor,
        "mode": mode,
        "best": next((row for row in history if row.get("epoch") == best_epoch), None)
        or best_row(history, monitor, mode),
        "final": history[-1] if history else None,
        "wall_seconds": round(wall_seconds, 3),
        "wall_clock_from": process_clock_source(),
        "startup_seconds": round(startup_seconds, 3),
        "imports_seconds": round(imports_seconds, 3),
        "train_seconds": round(speed.seconds, 3),
        "train_steps": speed.steps,
        "steps_per_second": None if rate is None else round(rate, 1),
        "peak_memory_mb": peak_memory_mb(),
    }


MONITOR = "monitor"  # optimized_metric=monitor: the task's monitored metric


def objective(metrics: dict[str, Any], name: str) -> float:
    """The value a sweep optimises: ``name`` at the best epoch, else among the test results.

    ``monitor`` is the monitored metric at the best epoch, negated when smaller is better,
    so a sweep maximising it works for every task.
    """
    if name == MONITOR:
        value = objective(metrics, metrics[MONITOR])
        return value if metrics.get("mode", "max") == "max" else -value
    for section in ("best", "test"):
        if name in (metrics.get(section) or {}):
            return float(metrics[section][name])
    known = sorted({*(metrics.get("best") or {}), *metrics["test"]} - {"epoch"})
    raise UserError(
        f"optimized_metric={name} is not a logged metric; use {MONITOR} or one of {known}"
    )


def summary_table(metrics: dict[str, Any], run_dir: Path) -> str:
    """The summary as a plain-text table for the console and the log."""
    best, final = metrics.get("best") or {}, metrics.get("final") or {}
    table = Table(title="run summary", title_justify="left")
    table.add_column("metric")
    table.add_column(f"best (epoch {best['epoch']:.0f})" if best else "best", justify="right")
    table.add_column(f"final (epoch {final['epoch']:.0f})" if final else "final", justify="right")
    names = sorted({*best, *final} - {"epoch"}, key=_metric_order)
    for name in names:
        table.add_row(name, _number(best.get(name)), _number(final.get(name)))
    for name, value in sorted(metrics["test"].items()):
        table.add_row(f"{name} (best checkpoint)", _number(value), "")
    parts: list[Table] = [table]
    if metrics.get("per_class"):
        parts.append(per_class_table(metrics["per_class"]))

    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    checkpoint = metrics.get("best_checkpoint")
    facts.add_row("best checkpoint", _relative(checkpoint, run_dir) if checkpoint else "none")
    facts.add_row("epochs / steps", f"{metrics['epochs']} / {metrics['steps']}")
    facts.add_row("wall time", wall_time(metrics))
    facts.add_row("steps/s", _number(metrics.get("steps_per_second"), ",.1f"))
    memory = metrics["peak_memory_mb"]
    peak = f"host {memory['host']:,.0f} MiB"
    if memory.get("cuda") is not None:
        peak += f", cuda {memory['cuda']:,.0f} MiB"
    facts.add_row("peak memory", peak)
    return as_text(Group(*parts, facts))


PER_CLASS_ROWS = 20  # more classes: the rest are in metrics.json


def per_class_table(rows: dict[str, dict[str, float]]) -> Table:
    """Precision, recall and support of each class on the test split (best checkpoint)."""
    table = Table(title="test split per class (best checkpoint)", title_justify="left")
    for name in ("class", "precision", "recall", "support"):
        table.add_column(name, justify="left" if name == "class" else "right")
    for name, row in list(rows.items())[:PER_CLASS_ROWS]:
        shown = Text(inert(name))  # a name from the data: no rich markup, no control codes
        table.add_row(
            shown, _number(row["precision"]), _number(row["recall"]), f"{row['support']:.0f}"
        )
    if len(rows) > PER_CLASS_ROWS:
        table.add_row(f"... {len(rows) - PER_CLASS_ROWS} more in metrics.json", "", "", "")
    return table


def wall_time(metrics: dict[str, Any]) -> str:
    """``16.5 s from process start: start-up 9.7 s (imports and config 7.1 s), fit 6.5 s``."""
    fit = f"fit {metrics['fit_seconds']:.1f} s"
    if "startup_seconds" not in metrics:  # metrics.json written before 0.2
        return f"{metrics['wall_seconds']:.1f} s ({fit})"
    return (
        f"{metrics['wall_seconds']:.1f} s from {metrics['wall_clock_from']}: "
        f"start-up {metrics['startup_seconds']:.1f} s "
        f"(imports and config {metrics['imports_seconds']:.1f} s), {fit}"
    )


def _metric_order(name: str) -> tuple[int, str]:
    order = ("lr", *STAGES)
    first = name.split("/", 1)[0]
    return (order.index(first) if first in order else len(order)), name


def _number(value: float | None, spec: str = ".4f") -> str:
    if value is None:
        return "-"
    return format(value, ".3g" if 0 < abs(value) < 1e-3 else spec)


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return path
