"""What platekit's loop costs: the project's Lightning loop against bare Lightning and a plain
PyTorch loop, the epoch boundary, time to first step and the commands' start-up.

A developer benchmark of the template repo (make bench there), run on a project: the
fixture project platekit's tests use, or a bake (--project). Writes bench.json.

    python platekit/benchmarks/loop_overhead.py [--project DIR] [--out DIR] [options] [overrides]

Overrides are a training run's (model=mlp data.batch_size=128 trainer=cpu).
"""

import argparse
import copy
import logging
import math
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning
import torch
from lightning import LightningDataModule, LightningModule
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError
from platekit._files import write_json
from platekit.commands._bench import quiet_lightning, without_progress_bars
from platekit.training._summary import peak_memory_mb
from platekit.training._trainer import build_parts, model_for, prepare_run

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # run as a script: its package is the folder above
    sys.path.insert(0, str(HERE.parent))

from benchmarks.commands import measure_commands  # noqa: E402
from benchmarks.loops import (  # noqa: E402
    CLOCKS,
    Clock,
    boundary_loop,
    lightning_loop,
    plain_loop,
    train_batch_size,
    train_tensors,
)
from benchmarks.report import table  # noqa: E402
from benchmarks.startup import measure_startup  # noqa: E402
from benchmarks.stats import CONFIDENCE, INCONCLUSIVE, PairedRatio  # noqa: E402

log = logging.getLogger("loop_overhead")

FIXTURE_PROJECT = HERE.parent / "tests" / "project"
# The target: the project loop's steps/s over bare Lightning's (what the project adds to
# Lightning). Against the plain loop the ratio is information: it includes Lightning's
# own cost, which no project setting removes (about 0.87 for the default CNN, 1 thread).
TARGET_OVER_BARE = 0.97
TARGET_ABOVE_IMPORT_S = 1.5  # time to first step minus `python -c "import lightning"`
TARGET_BOUNDARY_STEPS = 2.0  # an epoch boundary's extra time, in steps of the model


def options(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=FIXTURE_PROJECT, help="a bake's folder")
    parser.add_argument("--out", type=Path, default=Path("build/bench"), help="run directory")
    add = parser.add_argument
    add("--steps", type=int, default=200, help="timed training steps per run")
    add("--warmup", type=int, default=10, help="steps run before the clock starts")
    add("--repeats", type=int, default=6, help="rounds at least (6 bound a median's interval)")
    add("--max-pairs", type=int, default=20, help="rounds at most, until the target is judged")
    add("--boundary-epochs", type=int, default=8, help="whole epochs timed for the boundary")
    add("--startup-runs", type=int, default=3, help="fresh processes to first step (0: skip)")
    add("--command-runs", type=int, default=1, help="launches of each command (0: skip)")
    add("--clock", choices=sorted(CLOCKS), default="wall", help="cpu: steadier on a busy machine")
    args, overrides = parser.parse_known_args(argv)
    minimums = {"steps": 1, "warmup": 1, "repeats": 1, "max_pairs": 1, "boundary_epochs": 2}
    for name, least in {**minimums, "startup_runs": 0, "command_runs": 0}.items():
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be >= {least}")
    return args, overrides


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every section on the project; write ``bench.json`` in ``--out``; return it."""
    args, overrides = options(sys.argv[1:] if argv is None else argv)
    use_project(args.project)
    from platekit.testing import compose_config

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = compose_config(args.out.resolve(), overrides, "train")
    run_dir = prepare_run(cfg)
    with quiet_lightning():
        results = run_sections(cfg, args, overrides)
    write_json(run_dir / "bench.json", results)
    for line in table(results):
        log.info(line)
    log.info("bench.json: %s", run_dir / "bench.json")
    return results


def use_project(root: Path) -> None:
    """Import the project's package, which makes it the project platekit runs."""
    [package] = [path.name for path in (root / "src").iterdir() if (path / "__init__.py").is_file()]
    sys.path.insert(0, str(root.resolve() / "src"))
    __import__(package)


def run_sections(cfg: DictConfig, args: argparse.Namespace, overrides: list[str]) -> dict[str, Any]:
    """Every figure of the benchmark, grouped by section."""
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
    _, trainer = lightning_loop(cfg, fresh_model(), datamodule, steps=1, warmup=args.warmup)
    device, precision = trainer.strategy.root_device, str(trainer.precision)
    clock = pick_clock(args.clock, device)
    loop = compare_loops(cfg, args, fresh_model, datamodule, device, precision, clock)
    loop["target_over_bare"] = TARGET_OVER_BARE
    boundary = epoch_boundary(cfg, fresh_model(), datamodule, args.boundary_epochs, clock)
    memory = peak_memory(device)
    commands = measure_commands(overrides, args.command_runs) if args.command_runs else None
    startup = None
    if args.startup_runs > 0:
        startup = measure_startup(overrides, args.startup_runs, args.clock)
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
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "max_pairs": args.max_pairs,
            "clock": args.clock,
            "overrides": OmegaConf.to_container(OmegaConf.create(overrides)),
        },
        "loop": loop,
        "epoch_boundary": boundary,
        "first_step": startup,
        "commands": commands,
        "memory": memory,
    }


def compare_loops(
    cfg: DictConfig,
    args: argparse.Namespace,
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
    go on from ``--repeats`` up to ``--max-pairs`` until the interval of the median
    project / bare ratio lies wholly on one side of the target (``stats.py``).
    """
    inputs, targets = train_tensors(datamodule, device)
    plain: list[float] = []
    real: list[float] = []
    bare: list[float] = []
    for pair in range(max(args.max_pairs, args.repeats)):
        seconds = plain_loop(
            fresh_model().to(device),
            inputs,
            targets,
            batch_size=train_batch_size(datamodule),
            steps=args.steps,
            warmup=args.warmup,
            precision=precision,
            clock=clock,
        )
        plain.append(args.steps / seconds)
        for is_bare in (False, True) if pair % 2 == 0 else (True, False):
            rate = project_rate(cfg, args, fresh_model, datamodule, clock=clock, bare=is_bare)
            (bare if is_bare else real).append(rate)
        judged = PairedRatio.of(ratios(bare, real), TARGET_OVER_BARE)
        if len(real) >= args.repeats and judged.verdict != INCONCLUSIVE:
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


def ratios(reference: list[float], other: list[float]) -> list[float]:
    """``other / reference`` round by round."""
    return [o / r for r, o in zip(reference, other, strict=True)]


def finite(low: float, high: float) -> list[float] | None:
    """An interval as JSON holds it: None when too few pairs bound it."""
    return None if math.isinf(low) or math.isinf(high) else [low, high]


def project_rate(
    cfg: DictConfig,
    args: argparse.Namespace,
    fresh_model: Callable[[], LightningModule],
    datamodule: LightningDataModule,
    **variant: Any,
) -> float:
    """Steps/s of one project-loop run on a fresh model; ``variant``: ``lightning_loop`` args."""
    seconds, _ = lightning_loop(
        cfg, fresh_model(), datamodule, steps=args.steps, warmup=args.warmup, **variant
    )
    return args.steps / seconds


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


def peak_memory(device: torch.device) -> dict[str, Any]:
    """Peak device memory on CUDA, else the process's peak resident set size."""
    peak = peak_memory_mb()
    if device.type == "cuda":
        return {"measure": "max_memory_allocated", "peak_mb": peak["cuda"]}
    return {"measure": "peak RSS", "peak_mb": peak["host"]}


def pick_clock(name: str, device: torch.device) -> Clock:
    if name == "cpu" and device.type != "cpu":
        raise UserError(
            f"--clock cpu counts CPU time, which misses work on {device}; use --clock wall there"
        )
    return CLOCKS[name]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
