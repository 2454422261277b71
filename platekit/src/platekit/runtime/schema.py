"""What every config value the project defines must be: one table, checked before a run.

``RULES`` maps a dotted path pattern to a ``Rule``: ``*`` stands for one key, ``**`` for one
or more. The first matching pattern wins, so specific patterns come before general ones.
``problems(cfg)`` walks the composed config and returns one line per value that breaks its
rule; values the table does not name (keys a user added to their own class) are left to
the code that reads them. A value the project does not own, such as a Lightning callback's
constructor argument, has a ``passed(...)`` rule naming the code that checks it.

To add a setting: add its rule here. ``tests/test_config_schema.py`` fails for any value
in ``configs/`` that no rule covers.
"""

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from .precision import ALIASES, PRESETS


@dataclass(frozen=True)
class Rule:
    """``need``: what a value must be, as the message says it; ``example``: a good value."""

    need: str
    example: str = ""
    ok: Callable[[Any], bool] = lambda value: True
    checked_elsewhere: bool = False  # passed on unchecked; ``need`` names who checks it


def integer(low: int | None = None, high: int | None = None, *, example: int) -> Rule:
    bounds = _bounds(low, high)

    def ok(value: Any) -> bool:
        return _is_int(value) and _within(value, low, high)

    return Rule(f"an integer{bounds}", str(example), ok)


def number(
    *,
    above: float | None = None,
    low: float | None = None,
    below: float | None = None,
    high: float | None = None,
    example: float,
) -> Rule:
    """A finite number: ``> above``, ``>= low``, ``< below``, ``<= high`` (each optional)."""
    limits = ((">", above), (">=", low), ("<", below), ("<=", high))
    bounds = " and ".join(f"{sign} {limit:g}" for sign, limit in limits if limit is not None)

    def ok(value: Any) -> bool:
        if not _is_number(value) or not math.isfinite(value):
            return False
        return (
            (above is None or value > above)
            and (low is None or value >= low)
            and (below is None or value < below)
            and (high is None or value <= high)
        )

    return Rule(f"a finite number {bounds}".rstrip(), f"{example:g}", ok)


def choice(*options: Any, example: Any = None) -> Rule:
    shown = ", ".join(_show(option) for option in options)
    typed = {(_show(option), type(option)) for option in options}  # 1 is not true nor "1"
    first = options[0] if example is None else example
    return Rule(f"one of {shown}", _show(first), lambda v: (_show(v), type(v)) in typed)


def flag() -> Rule:
    return Rule("true or false", "true", lambda value: isinstance(value, bool))


def text(example: str) -> Rule:
    return Rule("a non-empty string", example, lambda value: isinstance(value, str) and bool(value))


def matching(need: str, pattern: str, *, example: str) -> Rule:
    """A string matching the regular expression ``pattern`` as a whole."""
    return Rule(need, example, lambda v: isinstance(v, str) and bool(re.fullmatch(pattern, v)))


def target() -> Rule:
    """A ``_target_``: the dotted name of what Hydra builds (imported when it is built)."""
    return matching("a dotted class or function name", r"[\w.]+", example="torch.optim.AdamW")


def directory(example: str) -> Rule:
    """A directory to write into: not an existing file, and not below one."""
    return Rule("a directory path, not an existing file or below one", example, _can_be_dir)


def existing(kind: str, example: str) -> Rule:
    """An existing ``file`` or ``directory``."""
    is_kind = Path.is_file if kind == "file" else Path.is_dir
    return Rule(
        f"an existing {kind}",
        example,
        lambda value: isinstance(value, str) and bool(value) and is_kind(Path(value)),
    )


def list_of(item: Rule, *, example: str) -> Rule:
    def ok(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(item.ok(v) for v in value)

    return Rule(f"a non-empty list, each {item.need}", example, ok)


def either(*rules: Rule) -> Rule:
    return Rule(
        " or ".join(rule.need for rule in rules),
        rules[0].example,
        lambda value: any(rule.ok(value) for rule in rules),
    )


def null_or(rule: Rule) -> Rule:
    return Rule(f"null or {rule.need}", rule.example, lambda value: value is None or rule.ok(value))


def passed(to: str) -> Rule:
    """A value handed to ``to`` as it is; ``to`` checks it when it is built or run."""
    return Rule(f"passed to {to}, which checks it", checked_elsewhere=True)


def rule_for(path: str) -> Rule | None:
    """The rule of the config value at dotted ``path``, or ``None`` if no pattern names it."""
    for pattern, rule in RULES:
        if _regex(pattern).fullmatch(path):
            return rule
    return None


def problems(cfg: DictConfig) -> list[str]:
    """One line per value of ``cfg`` that breaks its rule, in config order.

    A value written as an interpolation (``${seed}``, ``${paths.output_dir}/checkpoints``)
    mostly breaks its rule because a value it refers to does: such lines are left out while
    any value written out is wrong, so each mistake is named once.
    """
    written: list[str] = []
    derived: list[str] = []
    good: dict[str, Any] = {}
    for path, raw in leaves(OmegaConf.to_container(cfg, resolve=False)):
        rule = rule_for(path)
        if rule is None or rule.checked_elsewhere:
            continue
        line, value = check(cfg, path, raw, rule)
        if line is None:
            good[path] = value
        else:
            (derived if isinstance(raw, str) and "${" in raw else written).append(line)
    for relation in RELATIONS:
        if all(path in good for path in relation.paths):
            values = [good[path] for path in relation.paths]
            if not relation.ok(*values):
                shown = " ".join(f"{path}={_show(good[path])}" for path in relation.paths)
                written.append(f"{shown}: {relation.need}")
    return written or derived


def check(cfg: DictConfig, path: str, raw: Any, rule: Rule) -> tuple[str | None, Any]:
    """``(problem or None, resolved value)`` of the value at ``path`` under ``rule``."""
    try:
        value = _plain(OmegaConf.select(cfg, path, throw_on_missing=True))
    except MissingMandatoryValue:
        return f"{path}=???: must be set, to {rule.need} (e.g. {path}={rule.example})", None
    except Exception as error:  # any resolver's failure: say which value and why
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"{path}={_show(raw)}: cannot be resolved ({lines[0]})", None
    return (None if rule.ok(value) else complaint(path, value, rule)), value


def complaint(path: str, value: Any, rule: Rule) -> str:
    """The line for ``path=value`` breaking ``rule``, with a value that meets it."""
    return f"{path}={_show(value)}: must be {rule.need} (e.g. {path}={rule.example})"


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of each value in a plain config: scalars, lists and empty
    mappings. A config file's top-level ``defaults`` list is Hydra's, not a value."""
    if isinstance(node, dict) and node:
        for key, child in node.items():
            if key != "defaults" or prefix:
                yield from leaves(child, f"{prefix}{key}.")
    elif prefix:
        yield prefix[:-1], node


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    parts = (
        r"[^.]+(\.[^.]+)*" if part == "**" else re.escape(part).replace(r"\*", r"[^.]*")
        for part in pattern.split(".")
    )
    return re.compile(r"\.".join(parts))


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _show(value: Any) -> str:
    """A value as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_show(item) for item in value) + "]"
    return str(value)


def _bounds(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" >= {low}"
    return f" <= {high}" if high is not None else ""


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _can_be_dir(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    path = Path(value)
    for place in (path, *path.parents):
        if place.exists():
            return place.is_dir()
    return True


MAPPING = Rule("a mapping", "{}", lambda value: isinstance(value, dict))
SEED = integer(0, 2**32 - 1, example=0)  # numpy's seed range, as Lightning's seed_everything
# Opened and verified by the checkpoint loader (train's ckpt_path also takes `last`).
CHECKPOINT = Rule(
    "a checkpoint path",
    "outputs/train/runs/<time>/checkpoints/last.ckpt",
    lambda value: value is None or (isinstance(value, str) and bool(value)),
)
# A count of batches (an int) or a fraction of them (a float), as Lightning takes both.
BATCHES = either(integer(0, example=5), number(low=0.0, high=1.0, example=0.25))
DEVICES = either(
    choice("auto", -1),
    integer(1, example=1),
    list_of(integer(0, example=0), example="[0,1]"),
    matching("a string of device indices", r"\d+(,\d+)*,?", example="0,1"),
)
RUN_MODE = Rule(  # Hydra gives its RunMode enum, a user writes the name
    "null, RUN or MULTIRUN",
    "MULTIRUN",
    lambda value: value is None or getattr(value, "name", value) in ("RUN", "MULTIRUN"),
)
TASK_NAME = matching("a name without '/'", r"[^/\\]+", example="train")
CLASS_NAMES = Rule(
    "a list of exact class names (package.module.Class)",
    "[my_models.nets.ResNet]",
    lambda value: (
        isinstance(value, list)
        and all(
            isinstance(item, str) and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", item)
            for item in value
        )
    ),
)
# As Lightning 2.6 takes them: auto, gpu and its registry's names. Spelled out rather than
# read from the registry: importing Lightning would cost every command (ONNX predict too)
# seconds before its config is checked.
ACCELERATORS = choice("auto", "cpu", "gpu", "cuda", "mps", "tpu", "xla")
PRECISIONS = choice(*PRESETS, *ALIASES, *(int(a) for a in ALIASES if a.isdigit()))


def optimizer_rules(prefix: str) -> tuple[tuple[str, Rule], ...]:
    """An optimizer's node at ``prefix``: its own arguments go to its class."""
    return (
        (prefix, null_or(MAPPING)),
        (f"{prefix}._target_", target()),
        (f"{prefix}.lr", number(above=0.0, example=0.003)),
        (f"{prefix}.weight_decay", number(low=0.0, example=0.01)),
        (f"{prefix}.**", passed(f"the optimizer class ({prefix}._target_)")),
    )


def scheduler_rules(prefix: str) -> tuple[tuple[str, Rule], ...]:
    """A learning-rate scheduler's node at ``prefix``."""
    return (
        (prefix, null_or(MAPPING)),
        (f"{prefix}._target_", target()),
        (f"{prefix}.**", passed(f"the scheduler class ({prefix}._target_)")),
    )


RULES: tuple[tuple[str, Rule], ...] = (
    # the task a model learns: null follows the data (models/tasks.py)
    ("model.task", null_or(MAPPING)),
    ("model.task._target_", target()),
    ("model.task.**", passed("the task class (model.task._target_)")),
    # the sweep (configs/hparams_search/, sweeps/config.py checks the rest)
    ("sweep.study", TASK_NAME),
    ("sweep.direction", choice("maximize", "minimize")),
    ("sweep.n_trials", integer(1, example=20)),
    ("sweep.workers", integer(0, example=2)),
    ("sweep.storage", text("sqlite")),
    ("sweep.heartbeat_s", number(above=0.0, example=10)),
    ("sweep.stale_after_s", number(above=0.0, example=120)),
    ("sweep.worker", passed("the sweep command (set per worker)")),
    ("sweep.sampler", null_or(MAPPING)),
    ("sweep.sampler._target_", target()),
    ("sweep.sampler.**", passed("the Optuna sampler (sweep.sampler._target_)")),
    ("sweep.pruner", null_or(MAPPING)),
    ("sweep.pruner._target_", target()),
    ("sweep.pruner.**", passed("the Optuna pruner (sweep.pruner._target_)")),
    ("sweep.params.**", passed("the sweep's search space (sweeps/space.py)")),
    # train.yaml, eval.yaml, export.yaml, predict.yaml, bench.yaml
    ("task_name", TASK_NAME),
    ("seed", SEED),
    ("compile", flag()),
    # train: auto or a count; serve: null (onnxruntime's own choice) or a count
    ("threads", null_or(either(choice("auto"), integer(1, example=2)))),
    ("ckpt_path", CHECKPOINT),
    ("init_from", CHECKPOINT),
    ("init_strict", flag()),
    ("optimized_metric", null_or(text("monitor"))),
    ("model_path", text("outputs/export/runs/<time>/model.onnx")),
    ("inputs", either(text("x.npy"), list_of(text("x.npy"), example="[a.png,more/]"))),
    ("output_path", text("out.csv")),
    ("npz_key", null_or(text("x"))),
    ("invert", flag()),
    ("batch_size", integer(1, example=512)),
    ("trusted_classes", CLASS_NAMES),
    ("opset", integer(7, example=18)),
    ("batch_sizes", list_of(integer(1, example=1), example="[1,7,64]")),
    ("tolerance", number(above=0.0, example=1e-4)),
    ("repeats", integer(1, example=50)),
    ("bench.steps", integer(1, example=200)),
    ("bench.warmup", integer(0, example=10)),
    ("bench.repeats", integer(1, example=5)),
    ("bench.data_batches", integer(1, example=200)),
    ("bench.startup_runs", integer(0, example=3)),
    ("bench.command_runs", integer(0, example=1)),
    ("bench.boundary_epochs", integer(2, example=8)),
    ("bench.clock", choice("wall", "cpu")),
    # paths/ and hydra/: directories the run writes into
    ("paths.output_dir", directory("outputs/train/runs/mine")),
    ("paths.*", directory("outputs")),
    ("hydra.run.dir", directory("outputs/train/runs/mine")),
    ("hydra.sweep.dir", directory("outputs/train/multiruns/mine")),
    ("hydra.sweep.subdir", passed("Hydra's multirun")),
    ("hydra.job.chdir", flag()),
    ("hydra.mode", RUN_MODE),
    ("hydra.job_logging.**", passed("logging.config.dictConfig")),
    ("hydra.sweeper.**", passed("the Hydra sweeper plugin")),
    ("hydra.launcher.**", passed("the Hydra launcher plugin")),
    ("hydra.callbacks.**", passed("Hydra's callbacks (runtime/run_start.py)")),
    # data/: every data module's settings (data.* of eval/export override the checkpoint's)
    ("data", MAPPING),
    ("data._target_", target()),
    ("data.batch_size", integer(1, example=64)),
    ("data.eval_batch_size", integer(1, example=512)),
    ("data.num_workers", integer(0, example=0)),
    ("data.val_fraction", number(low=0.0, below=1.0, example=0.15)),
    ("data.test_fraction", number(low=0.0, below=1.0, example=0.15)),
    ("data.seed", SEED),
    ("data.normalize", choice("scalar", "channel", "feature", "none")),
    ("data.data_dir", directory("data")),
    ("data.path", null_or(existing("file", "/abs/table.csv"))),
    ("data.target", text("label")),
    ("data.features", null_or(list_of(text("x1"), example="[x1,x2]"))),
    ("data.target_kind", choice("auto", "class", "value")),
    ("data.example", choice("wine", "diabetes")),
    ("data.root", null_or(existing("directory", "/abs/folder"))),
    ("data.image_size", integer(1, example=32)),
    ("data.channels", choice(1, 3, example=3)),
    ("data.crop_padding", integer(0, example=4)),
    ("data.flip", flag()),
    ("data.cache_decoded", flag()),
    # model/, optimizer/, scheduler/ (today's model.optimizer and the optimizer group alike)
    ("model._target_", target()),
    ("model.num_classes", null_or(integer(1, example=10))),
    ("model.net._target_", target()),
    ("model.net.channels", list_of(integer(1, example=32), example="[32,64]")),
    ("model.net.hidden", list_of(integer(1, example=256), example="[256,128]")),
    ("model.net.dropout", number(low=0.0, below=1.0, example=0.1)),
    ("model.net.**", passed("the net's class (model.net._target_)")),
    *optimizer_rules("model.optimizer"),
    *optimizer_rules("optimizer"),
    *scheduler_rules("model.scheduler"),
    *scheduler_rules("scheduler"),
    # trainer/: lightning.Trainer arguments
    ("trainer._target_", target()),
    ("trainer.default_root_dir", directory("outputs")),
    ("trainer.accelerator", ACCELERATORS),
    ("trainer.devices", DEVICES),
    ("trainer.num_nodes", integer(1, example=1)),
    ("trainer.precision", PRECISIONS),
    ("trainer.max_epochs", integer(-1, example=15)),
    ("trainer.min_epochs", null_or(integer(0, example=1))),
    ("trainer.max_steps", integer(-1, example=1000)),
    ("trainer.accumulate_grad_batches", integer(1, example=1)),
    ("trainer.gradient_clip_val", null_or(number(above=0.0, example=1.0))),
    ("trainer.gradient_clip_algorithm", choice("norm", "value")),
    ("trainer.check_val_every_n_epoch", null_or(integer(1, example=1))),
    ("trainer.log_every_n_steps", integer(1, example=10)),
    ("trainer.deterministic", either(flag(), choice("warn"))),
    ("trainer.enable_model_summary", flag()),
    ("trainer.enable_progress_bar", flag()),
    ("trainer.fast_dev_run", either(flag(), integer(0, example=1))),
    ("trainer.limit_*_batches", null_or(BATCHES)),
    ("trainer.overfit_batches", BATCHES),
    ("trainer.plugins", passed("lightning.Trainer")),
    ("trainer.strategy", either(text("ddp"), MAPPING)),
    ("trainer.strategy.**", passed("the strategy class (trainer.strategy._target_)")),
    # callbacks/ and logger/: one entry each, null turns it off
    ("callbacks", null_or(MAPPING)),
    ("callbacks.*", null_or(MAPPING)),
    ("callbacks.*._target_", target()),
    ("callbacks.*.monitor", null_or(text("monitor"))),
    ("callbacks.*.mode", null_or(choice("max", "min"))),  # null: the task's mode
    ("callbacks.model_checkpoint.dirpath", directory("outputs/train/runs/mine/checkpoints")),
    ("callbacks.model_checkpoint.save_top_k", integer(-1, example=1)),
    ("callbacks.model_checkpoint.last_every_n_steps", integer(0, example=0)),
    ("callbacks.model_checkpoint.*", passed("lightning's ModelCheckpoint")),
    ("callbacks.early_stopping.patience", integer(0, example=5)),
    ("callbacks.early_stopping.*", passed("lightning's EarlyStopping")),
    ("callbacks.learning_rate_monitor.logging_interval", null_or(choice("epoch", "step"))),
    ("callbacks.learning_rate_monitor.*", passed("lightning's LearningRateMonitor")),
    ("callbacks.progress_bar.refresh_every", integer(1, example=20)),
    ("callbacks.progress_bar.plain_interval_s", number(above=0.0, example=30)),
    ("callbacks.progress_bar.live", null_or(flag())),
    ("logger", null_or(MAPPING)),
    ("logger.*", null_or(MAPPING)),
    ("logger.*._target_", target()),
    ("logger.*.save_dir", directory("outputs")),
    ("logger.csv.*", passed("lightning's CSVLogger")),
    ("logger.tensorboard.*", passed("lightning's TensorBoardLogger")),
    ("logger.mlflow.*", passed("lightning's MLFlowLogger")),
    ("logger.wandb.*", passed("lightning's WandbLogger")),
)


@dataclass(frozen=True)
class Relation:
    """A rule over several values, checked once each of them meets its own rule."""

    paths: tuple[str, ...]
    need: str
    ok: Callable[..., bool]


RELATIONS = (
    Relation(
        ("data.val_fraction", "data.test_fraction"),
        "must add up to less than 1, leaving rows to train on",
        lambda val, test: val + test < 1,
    ),
)
