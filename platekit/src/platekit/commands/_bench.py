"""How fast this project trains on this machine, and which setting makes it faster.

python -m <package>.bench                       # the default model and data
python -m <package>.bench data=csv model=mlp    # the same overrides as train

Times the project's own loop (its Trainer, callbacks and data path, as ``train`` runs it,
without validation or checkpoint files) and the data path alone, then tries each setting
that can speed a run up here (a larger batch, worker processes or none, decoding once,
mixed precision) against the current settings, in rounds of alternated runs. A setting faster
in every round is advised with the speed it measured (``data.num_workers=1: 1.8x steps/s``).
Prints a table and writes ``bench.json`` in the run directory.
"""

import copy
import logging
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from hydra.utils import get_class
from lightning import Callback, LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError
from platekit._files import write_json
from platekit.config._rules import integer
from platekit.config._schema import declare
from platekit.config._threads import Threads, apply_threads, available_cores, choose_threads
from platekit.training._history import MetricHistory
from platekit.training._summary import peak_memory_mb
from platekit.training._trainer import build_parts, build_trainer, model_for, prepare_run

log = logging.getLogger(__name__)

declare(
    {
        "bench.steps": integer(1, example=30),
        "bench.warmup": integer(1, example=5),
        "bench.rounds": integer(1, example=3),
        "bench.data_batches": integer(1, example=50),
    }
)

Clock = Callable[[], float]
NEVER = 1_000_000  # check_val_every_n_epoch that keeps validation out of the timed steps
# A setting is advised when it is faster in every round and by this much in the median:
# smaller gains are within what a busy machine varies between runs.
ADVISE_AT = 1.05
# A setting slower than this many times the current one is timed over fewer steps.
SLOWER_CUT = 3.0
# Without workers a step waits for its batch: data-bound when making the batch takes this
# share of each step or more (making it free would then speed training up by a third).
DATA_BOUND_SHARE = 0.25


@dataclass(frozen=True)
class Trial:
    """One setting to try: the override a user would write, and what it speeds up."""

    override: str  # e.g. ``data.num_workers=1``
    per: str  # "steps/s", or "samples/s" where the batch size changes
    note: str = ""  # said with the advice (what else the setting changes)


def bench(cfg: DictConfig) -> dict[str, Any]:
    """Time the current settings and each trial; write ``bench.json``; return its content."""
    check_options(cfg.bench)
    run_dir = prepare_run(cfg)
    cfg = without_progress_bars(cfg)
    with quiet_lightning():
        results = measure(cfg)
    write_json(run_dir / "bench.json", results)
    for line in table(results):
        log.info(line)
    log.info("bench.json: %s", run_dir / "bench.json")
    return results


def measure(cfg: DictConfig) -> dict[str, Any]:
    """Time the configured training against each candidate setting (workers, precision,
    threads, ...), from the same initial weights, in interleaved rounds; the report's
    figures and advice are made from these ratios."""
    options = cfg.bench
    datamodule, model, info = build_parts(cfg)
    initial = copy.deepcopy(model.state_dict())

    def fresh() -> LightningModule:
        """The same net with the same initial weights, so every run starts alike."""
        built = model_for(cfg, datamodule, info)
        built.load_state_dict(initial)
        return built

    # A first run picks the device and precision, as a run would, and warms the caches; a
    # setting that runs far slower is timed over the steps that fit in a few times its time.
    apply_threads(threads_of(cfg))
    first, trainer = timed_fit(cfg, fresh(), datamodule, steps=options.steps, warmup=options.warmup)
    device, precision = trainer.strategy.root_device, str(trainer.precision)
    budget_s = SLOWER_CUT * first.seconds

    def steps_per_s(run_cfg: DictConfig, module: LightningDataModule) -> float:
        apply_threads(threads_of(run_cfg))
        timer, _ = timed_fit(run_cfg, fresh(), module, steps=options.steps,
                             warmup=options.warmup, budget_s=budget_s)  # fmt: skip
        return timer.rate

    batch = batch_size(cfg, datamodule)
    trials = candidates(cfg, datamodule, device, precision)
    variants = [with_override(cfg, trial.override) for trial in trials]
    runs = [(cfg, datamodule), *((variant, build_parts(variant)[0]) for variant in variants)]
    # Each round times the current settings and every trial once, in an order that turns
    # round by round, so a machine whose speed drifts slows each of them alike; a trial's
    # ratios are taken against the current settings' run of the same round.
    rounds = []
    for index in range(options.rounds):
        order = [(index + offset) % len(runs) for offset in range(len(runs))]
        rates = {which: steps_per_s(*runs[which]) for which in order}
        rounds.append([rates[which] for which in range(len(runs))])
    current = [rates[0] for rates in rounds]
    tried = []
    for which, (trial, variant) in enumerate(zip(trials, variants, strict=True), start=1):
        scale = batch_size(variant, runs[which][1]) / batch if trial.per == "samples/s" else 1.0
        tried.append(judged(trial, [scale * rates[which] / rates[0] for rates in rounds]))
    apply_threads(threads_of(cfg))
    rate = statistics.median(current)
    data = data_verdict(
        options.data_batches / data_seconds(datamodule, device, options.data_batches),
        rate,
        workers=loader_workers(datamodule),
        cores=available_cores(),
    )
    memory = peak_memory_mb()
    return {
        "setup": {
            "device": str(device),
            "threads": torch.get_num_threads(),
            "model": cfg.model.net._target_.rsplit(".", 1)[-1],
            "batch_size": batch,
            "num_workers": loader_workers(datamodule),
            "precision": precision,
            "steps": options.steps,
            "rounds": options.rounds,
        },
        "step": {
            "steps_per_s": rate,
            "samples_per_s": rate * batch,
            "ms": 1e3 / rate,
            "runs": len(current),
        },
        "data": data,
        "tried": tried,
        "advice": [entry for entry in tried if entry["verdict"] == "faster"],
        "memory": {
            "measure": "max_memory_allocated" if device.type == "cuda" else "peak RSS",
            "peak_mb": memory["cuda"] if device.type == "cuda" else memory["host"],
        },
    }


def candidates(
    cfg: DictConfig, datamodule: LightningDataModule, device: torch.device, precision: str
) -> list[Trial]:
    """The settings worth trying for this data module on this device, at ``precision``."""
    data = cfg.data
    settings = getattr(datamodule, "hparams", {})
    batch, rows = data.get("batch_size"), train_rows(datamodule)
    workers, cores = data.get("num_workers"), available_cores()
    threads = threads_of(cfg).count
    mixed = "bf16-mixed" if device.type == "cpu" or torch.cuda.is_bf16_supported() else "16-mixed"
    trials = [
        Trial(
            f"data.batch_size={2 * batch}",
            "samples/s",
            "a larger batch changes training: check optimizer.lr and the metrics",
        )
        if isinstance(batch, int) and (rows is None or 2 * batch <= rows)
        else None,
        # Worker processes pay off when making a batch is work; in-memory rows are sliced
        # fastest in the training process itself.
        (
            Trial(f"data.num_workers={min(2, cores - 1)}", "steps/s")
            if workers == 0 and cores > 1
            else Trial("data.num_workers=0", "steps/s")
            if isinstance(workers, int) and workers > 0
            else None
        ),
        Trial("data.cache_decoded=true", "steps/s", "decoded samples are held in memory")
        if settings.get("cache_decoded") is False
        else None,
        (
            Trial(f"trainer.precision={mixed}", "steps/s", "check the metrics against 32-true")
            if precision in ("32", "32-true")
            else Trial("trainer.precision=32-true", "steps/s")
        ),
        Trial(f"threads={cores}", "steps/s") if device.type == "cpu" and threads < cores else None,
    ]
    return [trial for trial in trials if trial is not None]


def judged(trial: Trial, ratios: list[float]) -> dict[str, Any]:
    """A trial's median speed-up over the current settings and whether to advise it."""
    median = statistics.median(ratios)
    faster = min(ratios) > 1 and median >= ADVISE_AT
    slower = max(ratios) < 1 and median <= 1 / ADVISE_AT
    return {
        "override": trial.override,
        "per": trial.per,
        "ratio": median,
        "ratios": ratios,
        "verdict": "faster" if faster else "slower" if slower else "no clear difference",
        "note": trial.note,
    }


def timed_fit(
    cfg: DictConfig,
    model: LightningModule,
    datamodule: LightningDataModule,
    *,
    steps: int,
    warmup: int,
    budget_s: float = math.inf,
    clock: Clock = time.perf_counter,
    callbacks: list[Callback] | None = None,
    **trainer_overrides: Any,
) -> tuple["StepClock", Trainer]:
    """``steps`` steps (after ``warmup``) of the project's own Trainer, callbacks and loggers,
    timed; fewer where they take more than ``budget_s``. Only what timing needs is changed: a
    step budget instead of epochs, and neither validation nor a checkpoint file inside the
    timed steps. ``callbacks``: the ones ``train`` adds (its metric history) unless given."""
    timer = StepClock(warmup, steps, clock, budget_s)
    trainer = build_trainer(
        cfg,
        callbacks=[*([MetricHistory()] if callbacks is None else callbacks), timer],
        task=getattr(model, "task", None),
        max_steps=warmup + steps,
        max_epochs=-1,
        check_val_every_n_epoch=NEVER,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        announce_precision=False,  # the table's first line shows it, once
        **trainer_overrides,
    )
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint):
            callback.save_last = False  # its hooks still run, but it writes no file
    trainer.fit(model, datamodule=datamodule)
    return timer, trainer


class StepClock(Callback):
    """Time training steps ``warmup + 1`` to ``warmup + steps`` of a fit, and stop the fit at
    the first step that ends past ``budget_s`` of timed steps."""

    def __init__(self, warmup: int, steps: int, clock: Clock, budget_s: float = math.inf) -> None:
        self.clock, self.warmup, self.steps, self.budget_s = clock, warmup, steps, budget_s
        self.count = 0
        self.started = 0.0
        self.seconds = math.nan
        self.timed = 0

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, index: int
    ) -> None:
        self.count += 1
        if self.count < self.warmup:
            return
        synchronize(pl_module.device)
        now = self.clock()
        if self.count == self.warmup:
            self.started = now
            return
        self.timed, self.seconds = self.count - self.warmup, now - self.started
        if self.seconds > self.budget_s:
            trainer.should_stop = True

    @property
    def rate(self) -> float:
        """Timed steps per second."""
        return self.timed / self.seconds


def data_seconds(
    datamodule: LightningDataModule,
    device: torch.device,
    batches: int,
    clock: Clock = time.perf_counter,
) -> float:
    """Seconds the train data path takes to deliver ``batches`` batches onto ``device`` alone:
    the data module's train loader, a new epoch set on its sampler, its transfer hook."""
    loader = datamodule.train_dataloader()
    set_epoch = getattr(getattr(loader, "sampler", None), "set_epoch", None)
    delivered, epoch = 0, 0
    synchronize(device)
    started = clock()
    while delivered < batches:
        if set_epoch is not None:
            set_epoch(epoch)
        for batch in loader:
            datamodule.transfer_batch_to_device(batch, device, 0)
            delivered += 1
            if delivered == batches:
                break
        epoch += 1
    synchronize(device)
    return clock() - started


def data_verdict(rate: float, step_rate: float, *, workers: int, cores: int) -> dict[str, Any]:
    """Is training held up by its data? ``rate``: batches/s of the train data path alone;
    ``step_rate``: steps/s of the whole loop.

    Without workers each step first makes its batch: the data's share of a step is
    ``step_rate / rate``, data-bound from ``DATA_BOUND_SHARE``. With workers the two overlap,
    but training keeps one of the ``cores``: the data path was measured with
    ``min(workers, cores)`` of them and gets ``min(workers, cores - 1)`` while training, so
    its rate is scaled by that; data-bound when it then makes under 1.25 batches a step.
    """
    free = min(workers, cores - 1)
    if workers > 0 and free > 0:
        rate = rate * free / min(workers, cores)
        share = min(1.0, step_rate / rate)  # of the data path's capacity each step uses
        bound = rate < 1.25 * step_rate
    else:
        share = min(1.0, step_rate / rate)  # of each step spent making its batch
        bound = share >= DATA_BOUND_SHARE
    return {
        "batches_per_s": rate,
        "steps_per_s": step_rate,
        "workers": workers,
        "data_share": share,
        "verdict": "data-bound" if bound else "compute-bound",
    }


def table(results: dict[str, Any]) -> list[str]:
    """What ``bench`` prints: the setup, the step, the data path, each trial, the advice."""
    setup, step, data = results["setup"], results["step"], results["data"]
    lines = [
        f"bench: {setup['model']} on {setup['device']} ({plural(setup['threads'], 'thread')}), "
        f"batch {setup['batch_size']}, {plural(setup['num_workers'], 'worker')}, "
        f"{setup['precision']}",
        row(
            "step",
            f"{step['ms']:.2f} ms: {step['steps_per_s']:.1f} steps/s, "
            f"{step['samples_per_s']:,.0f} samples/s (median of {step['runs']} runs of "
            f"{setup['steps']} steps)",
        ),
        row("data path alone", data_text(data)),
    ]
    if results["tried"]:
        lines.append(
            f"tried against the current settings, {setup['rounds']} rounds of alternated runs"
        )
    for entry in results["tried"]:
        spread = f"{min(entry['ratios']):.2f}-{max(entry['ratios']):.2f}"
        lines.append(
            row(
                entry["override"],
                f"{entry['ratio']:.2f}x {entry['per']} ({spread}): {entry['verdict']}",
            )
        )
    for entry in results["advice"]:
        note = f" ({entry['note']})" if entry["note"] else ""
        lines.append(f"advice: {entry['override']}: {entry['ratio']:.2f}x {entry['per']}{note}")
    if not results["advice"]:
        lines.append("advice: keep the current settings: nothing tried was faster in every round")
    memory = results["memory"]
    lines.append(row(memory["measure"], f"{memory['peak_mb']:.0f} MiB"))
    return lines


def data_text(data: dict[str, Any]) -> str:
    per_batch = 1e3 / data["batches_per_s"]
    if data["workers"] == 0:
        use = f"{data['data_share']:.0%} of a step"
    else:
        use = f"{data['data_share']:.0%} of what {data['workers']} workers deliver"
    bound = data["verdict"] == "data-bound"
    why = "the data path is the bottleneck" if bound else "faster data would not help much"
    return f"{per_batch:.2f} ms a batch: {use} ({data['verdict']}: {why})"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def row(label: str, value: str) -> str:
    return f"  {label:<30} {value}"


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """Hide what Lightning says on every fit: the benchmark runs many of them."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*exists and is not empty")
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a clock read after it is honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def with_override(cfg: DictConfig, override: str) -> DictConfig:
    """A copy of ``cfg`` with one ``key=value`` override applied."""
    key, value = override.split("=", 1)
    variant = copy.deepcopy(cfg)
    OmegaConf.update(variant, key, OmegaConf.create(f"value: {value}").value)
    return variant


def batch_size(cfg: DictConfig, datamodule: LightningDataModule) -> int:
    """The training batch size: the config's setting, else the first batch's length."""
    configured = cfg.data.get("batch_size")
    if isinstance(configured, int):
        return configured
    return len(next(iter(datamodule.train_dataloader()))[0])


def train_rows(datamodule: LightningDataModule) -> int | None:
    targets = getattr(datamodule, "targets", None)
    return len(targets("train")) if callable(targets) else None


def loader_workers(datamodule: LightningDataModule) -> int:
    """The train loader's worker processes (0: batches are made between steps)."""
    return int(getattr(datamodule.train_dataloader(), "num_workers", 0))


def threads_of(cfg: DictConfig) -> Threads:
    """The thread count a training run of ``cfg`` would use."""
    trainer = cfg.trainer
    return choose_threads(cfg.get("threads"), trainer.get("devices"), trainer.get("accelerator"))


def without_progress_bars(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` whose callbacks hold no progress bar: it would be timed too."""
    cfg = copy.deepcopy(cfg)
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is not None and issubclass(get_class(node._target_), ProgressBar):
            cfg.callbacks[name] = None
    return cfg


def check_options(options: DictConfig) -> None:
    """Reject counts the benchmark cannot run with, naming the fix."""
    for name, least in (("steps", 1), ("warmup", 1), ("rounds", 1), ("data_batches", 1)):
        if options[name] < least:
            raise UserError(f"bench.{name}={options[name]} must be >= {least}; raise it")
