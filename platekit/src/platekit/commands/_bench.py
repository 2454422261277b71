"""Benchmark the training loop on this machine; print a table and write ``bench.json``.

python -m <package>.bench                                    # default model, data and device
python -m <package>.bench model=mlp data.batch_size=128 bench.steps=500 trainer=cpu

Sections: the project's Lightning loop against a plain PyTorch loop, the data path alone,
time to first step, peak memory and, on CUDA, fp32 against mixed precision.
"""

import copy
import logging
import math
import os
import platform
import statistics
from collections.abc import Callable
from typing import Any

import lightning
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from lightning import LightningDataModule, LightningModule
from lightning.pytorch.callbacks import ProgressBar
from omegaconf import DictConfig

from platekit._errors import UserError
from platekit._files import write_json
from platekit.commands._bench_commands import measure_commands
from platekit.commands._bench_loops import (
    CLOCKS,
    Clock,
    boundary_loop,
    data_loop,
    lightning_loop,
    plain_loop,
    quiet_lightning,
    train_batch_size,
    train_tensors,
)
from platekit.commands._bench_report import table
from platekit.commands._bench_startup import measure_startup
from platekit.commands._bench_stats import CONFIDENCE, INCONCLUSIVE, PairedRatio
from platekit.training._summary import peak_memory_mb
from platekit.training._trainer import build_parts, model_for, prepare_run

log = logging.getLogger(__name__)

# The target: the project loop's steps/s over bare Lightning's (what the project adds to
# Lightning). Against the plain loop the ratio is information: it includes Lightning's
# own cost, which no project setting removes (about 0.87 for the default CNN, 1 thread).
TARGET_OVER_BARE = 0.97
TARGET_ABOVE_IMPORT_S = 1.5  # time to first step minus `python -c "import lightning"`
TARGET_BOUNDARY_STEPS = 2.0  # an epoch boundary's extra time, in steps of the model
DEFAULT_MAX_PAIRS = 20  # rounds of the loop comparison at most, unless bench.max_pairs says
# Without workers a step waits for its batch: data-bound when the data path takes this share
# of each step or more (making it free would then speed training up by a third or more).
DATA_BOUND_SHARE = 0.25


def bench(cfg: DictConfig) -> dict[str, Any]:
    """Run every section; write ``bench.json`` in the run directory; return its content."""
    check_options(cfg.bench)
    run_dir = prepare_run(cfg)
    with quiet_lightning():
        results = run_sections(cfg)
    write_json(run_dir / "bench.json", results)
    for line in table(results):
        log.info(line)
    log.info("bench.json: %s", run_dir / "bench.json")
    return results


def run_sections(cfg: DictConfig) -> dict[str, Any]:
    """Every figure of the benchmark, grouped by section."""
    options = cfg.bench
    cfg = without_progress_bars(cfg)
    datamodule, model, info = build_parts(cfg)
    initial = copy.deepcopy(model.state_dict())

    def fresh_model() -> LightningModule:
        """A new model with the same initial weights, so every run starts alike."""
        built = model_for(cfg, datamodule, info)
        built.load_state_dict(initial)
        return built

    # A short warm-up run picks the device and precision and sets the global flags a
    # real run sets (e.g. deterministic algorithms), so both loops run under them.
    _, trainer = lightning_loop(cfg, fresh_model(), datamodule, steps=1, warmup=options.warmup)
    device, precision = trainer.strategy.root_device, trainer.precision
    clock = pick_clock(options.clock, device)
    loop = compare_loops(cfg, fresh_model, datamodule, device, precision, clock)
    loop["target_over_bare"] = TARGET_OVER_BARE
    data_seconds = data_loop(datamodule, device, options.data_batches, clock)
    data = data_verdict(
        options.data_batches / data_seconds,
        loop["plain_steps_per_s"],
        workers=loader_workers(datamodule),
        cores=usable_cores(),
        helps=data_settings_that_help(datamodule),
    )
    boundary = epoch_boundary(cfg, fresh_model(), datamodule, options.boundary_epochs, clock)
    memory = peak_memory(device)
    commands = None
    if options.command_runs > 0:
        commands = measure_commands(task_overrides(), options.command_runs)
    startup = None
    if options.startup_runs > 0:
        startup = measure_startup(task_overrides(), options.startup_runs, options.clock)
        startup["target_above_s"] = TARGET_ABOVE_IMPORT_S
    return {
        "setup": {
            "device": str(device),
            "device_name": device_name(device),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "lightning": lightning.__version__,
            "model": cfg.model.net._target_.rsplit(".", 1)[-1],
            "batch_size": train_batch_size(datamodule),
            "precision": precision,
            "steps": options.steps,
            "warmup": options.warmup,
            "repeats": options.repeats,
            "max_pairs": max_pairs(options),
            "clock": options.clock,
        },
        "loop": loop,
        "data": data,
        "epoch_boundary": boundary,
        "first_step": startup,
        "commands": commands,
        "memory": memory,
        "precision": (
            compare_precisions(cfg, fresh_model, datamodule, device)
            if device.type == "cuda"
            else None
        ),
    }


def compare_loops(
    cfg: DictConfig,
    fresh_model: Callable[[], LightningModule],
    datamodule: LightningDataModule,
    device: torch.device,
    precision: str,
    clock: Clock,
) -> dict[str, Any]:
    """Steps/s of the plain loop, the project loop and bare Lightning, pair by pair.

    Bare Lightning is the same model and data with no callbacks, loggers or checkpoints:
    the part of the overhead that no project setting removes. Each round runs the three
    loops in turn (the project and bare loops swap order every round); each ratio is taken
    within its round, so a machine whose speed drifts between rounds skews it less. Rounds
    go on from ``bench.repeats`` up to ``bench.max_pairs`` until the interval of the median
    project / bare ratio lies wholly on one side of the target (``commands/_bench_stats.py``).
    """
    options = cfg.bench
    inputs, targets = train_tensors(datamodule, device)
    plain: list[float] = []
    real: list[float] = []
    bare: list[float] = []
    for pair in range(max(max_pairs(options), options.repeats)):
        seconds = plain_loop(
            fresh_model().to(device),
            inputs,
            targets,
            batch_size=train_batch_size(datamodule),
            steps=options.steps,
            warmup=options.warmup,
            precision=precision,
            clock=clock,
        )
        plain.append(options.steps / seconds)
        for is_bare in (False, True) if pair % 2 == 0 else (True, False):
            rate = project_rate(cfg, fresh_model, datamodule, clock=clock, bare=is_bare)
            (bare if is_bare else real).append(rate)
        judged = PairedRatio.of(ratios(bare, real), TARGET_OVER_BARE)
        if len(real) >= options.repeats and judged.verdict != INCONCLUSIVE:
            break
    over_bare = PairedRatio.of(ratios(bare, real), TARGET_OVER_BARE)
    bare_over_plain = PairedRatio.of(ratios(plain, bare), 1.0)
    return {
        "plain_steps_per_s": statistics.median(plain),
        "lightning_steps_per_s": statistics.median(real),
        "ratio": median_ratio(plain, real),
        "overhead_us_per_step": median_overhead_us(plain, real),
        "bare_lightning_steps_per_s": statistics.median(bare),
        "bare_ratio": bare_over_plain.median,
        "bare_ratio_interval": finite(bare_over_plain.low, bare_over_plain.high),
        "over_bare_ratio": over_bare.median,
        "over_bare_interval": finite(over_bare.low, over_bare.high),
        "over_bare_verdict": over_bare.verdict,
        "confidence": CONFIDENCE,
        "pairs": len(real),
        "over_bare_us_per_step": median_overhead_us(bare, real),
        "plain_runs": plain,
        "lightning_runs": real,
        "bare_lightning_runs": bare,
    }


def max_pairs(options: DictConfig) -> int:
    """``bench.max_pairs``; a bench.yaml written before it existed gets the default."""
    return int(options.get("max_pairs", DEFAULT_MAX_PAIRS))


def ratios(reference: list[float], other: list[float]) -> list[float]:
    """``other / reference`` round by round."""
    return [o / r for r, o in zip(reference, other, strict=True)]


def finite(low: float, high: float) -> list[float] | None:
    """An interval as JSON holds it: None when too few pairs bound it."""
    return None if math.isinf(low) or math.isinf(high) else [low, high]


def project_rate(
    cfg: DictConfig,
    fresh_model: Callable[[], LightningModule],
    datamodule: LightningDataModule,
    **variant: Any,
) -> float:
    """Steps/s of one project-loop run on a fresh model; ``variant``: ``lightning_loop`` options."""
    options = cfg.bench
    seconds, _ = lightning_loop(
        cfg, fresh_model(), datamodule, steps=options.steps, warmup=options.warmup, **variant
    )
    return options.steps / seconds


def median_ratio(plain: list[float], other: list[float]) -> float:
    """Median over rounds of one loop's steps/s over the plain loop's in the same round."""
    return statistics.median(ratios(plain, other))


def median_overhead_us(plain: list[float], other: list[float]) -> float:
    """Median over repeats of the extra microseconds per step over the plain loop."""
    return statistics.median((1 / o - 1 / p) * 1e6 for p, o in zip(plain, other, strict=True))


def epoch_boundary(
    cfg: DictConfig,
    model: LightningModule,
    datamodule: LightningDataModule,
    epochs: int,
    clock: Clock,
) -> dict[str, Any]:
    """What an epoch's end and the next one's start cost beyond an ordinary step, in steps."""
    timer = boundary_loop(cfg, model, datamodule, epochs=epochs, clock=clock)
    step = statistics.median(timer.steps) if timer.steps else float("nan")
    boundary = statistics.median(timer.boundaries) if timer.boundaries else float("nan")
    extra_steps = (boundary - step) / step if step > 0 else float("nan")
    return {
        "epochs": epochs,
        "steps_per_epoch": len(timer.steps) // epochs + 1 if epochs else 0,
        "step_ms": step * 1e3,
        "boundary_ms": boundary * 1e3,
        "extra_steps": extra_steps,
        "target_extra_steps": TARGET_BOUNDARY_STEPS,
    }


def data_verdict(
    rate: float,
    model_rate: float,
    *,
    workers: int | None = None,
    cores: int | None = None,
    helps: list[str] | None = None,
) -> dict[str, Any]:
    """Is training held up by its data? ``rate``: batches/s of the train data path alone;
    ``model_rate``: steps/s of the model alone on batches already in memory (the plain loop).

    With no workers (``workers=0``) each step first makes its batch, then computes: the
    data's share of a step is ``t_data / (t_data + t_model)``, and the run is data-bound
    when it reaches ``DATA_BOUND_SHARE``. With workers the two overlap, but the training
    process keeps one of the ``cores``: the data path alone was measured with
    ``min(workers, cores)`` of them and gets ``min(workers, cores - 1)`` while training, so
    its rate is scaled by that; the run is data-bound when the data then delivers fewer
    batches/s than the model takes. ``workers=None``: overlapping, on cores to spare.
    ``helps``: settings to try, kept when the verdict is data-bound.
    """
    if workers is not None and workers > 0 and cores is not None:
        free = min(workers, cores - 1)
        rate = rate * free / min(workers, cores) if free > 0 else rate
        workers = workers if free > 0 else 0  # no core to spare: the data waits its turn
    data_s, model_s = 1 / rate, 1 / model_rate
    if workers == 0:
        share = data_s / (data_s + model_s)
        bound = share >= DATA_BOUND_SHARE
    else:
        share = max(0.0, 1 - model_s / data_s)  # of each step spent waiting for data
        bound = rate < model_rate
    return {
        "batches_per_s": rate,
        "model_steps_per_s": model_rate,
        "data_share": share,
        "verdict": "data-bound" if bound else "compute-bound",
        "helps": (helps or []) if bound else [],
    }


def loader_workers(datamodule: LightningDataModule) -> int:
    """The train loader's worker processes (0: batches are made between steps)."""
    return int(getattr(datamodule.train_dataloader(), "num_workers", 0))


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def data_settings_that_help(datamodule: LightningDataModule) -> list[str]:
    """The data module's own settings that speed its data path up, as overrides to try."""
    settings = getattr(datamodule, "hparams", {})
    helps = []
    if settings.get("cache_decoded") is False:
        helps.append("data.cache_decoded=true (decode each sample once, at setup)")
    workers, cores = settings.get("num_workers"), usable_cores()
    if isinstance(workers, int) and workers < cores - 1:
        more = min(max(2 * workers, 2), cores - 1)
        helps.append(f"data.num_workers={more} (now {workers}; {cores} cores here)")
    return helps or ["a faster data path: the data module's decoding and augmentation"]


def compare_precisions(
    cfg: DictConfig,
    fresh_model: Callable[[], LightningModule],
    datamodule: LightningDataModule,
    device: torch.device,
) -> dict[str, dict[str, float]]:
    """Steps/s and peak memory of the project loop in fp32 and in mixed precision (CUDA)."""
    options = cfg.bench
    mixed = "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    runs: dict[str, list[tuple[float, float]]] = {"32-true": [], mixed: []}
    for _ in range(options.repeats):
        for precision, figures in runs.items():
            torch.cuda.reset_peak_memory_stats(device)
            rate = project_rate(cfg, fresh_model, datamodule, precision=precision)
            figures.append((rate, torch.cuda.max_memory_allocated(device)))
    return {
        precision: {
            "steps_per_s": statistics.median(rate for rate, _ in figures),
            "peak_mb": max(peak for _, peak in figures) / 2**20,
        }
        for precision, figures in runs.items()
    }


def peak_memory(device: torch.device) -> dict[str, Any]:
    """Peak device memory on CUDA, else the process's peak resident set size."""
    peak = peak_memory_mb()
    if device.type == "cuda":
        return {"measure": "max_memory_allocated", "peak_mb": peak["cuda"]}
    return {"measure": "peak RSS", "peak_mb": peak["host"]}


def check_options(options: DictConfig) -> None:
    """Reject counts the benchmark cannot run with, naming the fix."""
    minimums = (("steps", 1), ("warmup", 1), ("repeats", 1), ("max_pairs", 1), ("data_batches", 1))
    for name, least in (*minimums, ("boundary_epochs", 2)):
        if options.get(name, least) < least:
            raise UserError(f"bench.{name}={options[name]} must be >= {least}; raise it")
    if options.clock not in CLOCKS:
        raise UserError(
            f"bench.clock={options.clock} is not a clock; use one of {', '.join(CLOCKS)}"
        )
    for name in ("startup_runs", "command_runs"):
        if options[name] < 0:
            raise UserError(f"bench.{name}={options[name]} must be >= 0 (0 skips that section)")


def pick_clock(name: str, device: torch.device) -> Clock:
    if name == "cpu" and device.type != "cpu":
        raise UserError(
            f"bench.clock=cpu counts CPU time, which misses work on {device}; "
            "use bench.clock=wall there"
        )
    return CLOCKS[name]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def without_progress_bars(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` whose callbacks hold no progress bar: it would be timed too."""
    cfg = copy.deepcopy(cfg)
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is not None and issubclass(get_class(node._target_), ProgressBar):
            cfg.callbacks[name] = None
    return cfg


def task_overrides() -> list[str]:
    """The command line's overrides that a training run understands (no ``bench.*``)."""
    if not HydraConfig.initialized():
        return []
    return [o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith("bench.")]
