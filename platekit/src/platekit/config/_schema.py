"""What every config value must be, checked before a run: one line per problem.

Two sources, and no value is described twice:

- **Components** (a node with a ``_target_``: ``data``, ``model``, ``model.net``,
  ``model.task``, ``optimizer``, ``scheduler``, each ``callbacks.*`` and ``logger.*``, and
  a part a net's arguments name): the class the ``_target_`` names declares its settings
  by its ``__init__`` (``platekit/settings.py``). A key it does not take is refused naming
  the nearest settings; a value is checked against the parameter's annotation and its
  declared range. The class is resolved by the checkpoint class registry (only its
  defining module is imported); a class outside the registry's roots (Lightning's own
  callbacks and loggers) is left to the code that builds it.
- **A command's own keys** (``port``, ``bench.steps``, ``sweep.heartbeat_s``): declared by
  the module whose code reads them, with ``declare`` (``commands/_serve.py``): a command
  checks the keys its code reads.
- **The machinery's keys** (``seed``, ``paths.*``, ``hydra.*``, and what the
  project does with a component beyond its class: a callback's ``mode: null`` follows the
  task): ``RULES`` below. Both map a dotted path pattern to a :class:`~.rules.Rule`; ``*``
  stands for one key, ``**`` for one or more, and the first matching pattern wins (declared
  ones first). A rule also wins over a component's parameter.
  ``LIBRARY_RANGES`` bounds the parameters of library classes that cannot be annotated
  where they are declared (a torch optimizer's ``lr``).
- **lightning.Trainer's arguments** (``trainer.*``): read off the installed Lightning's
  ``Trainer.__init__`` annotations (``config/_trainer.py``); ``RULES`` writes out only those
  a type cannot say (``trainer.precision``'s names, ``trainer.devices``).

A value neither names (a key of an ``eval`` ``data: {}``, whose class the checkpoint
holds) is left to the code that reads it.
"""

import difflib
import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from platekit._errors import UserError
from platekit._registry import DOTTED, HYDRA_KEYS, MAX_NAME, MovedNameError, Registry, active
from platekit.config._precision import ALIASES, PRESETS
from platekit.config._rules import (
    MAPPING,
    Rule,
    choice,
    directory,
    either,
    flag,
    integer,
    list_of,
    matching,
    null_or,
    number,
    passed,
    show,
    target,
    text,
    typed,
)
from platekit.config._trainer import trainer_rule, unknown_trainer_key
from platekit.settings import EMPTY, Range, Settings, annotated, settings_of

SEED = integer(0, 2**32 - 1, example=0)  # numpy's seed range, as Lightning's seed_everything
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

RULES: tuple[tuple[str, Rule], ...] = (
    # components: a mapping each (null turns an optional one off); their keys are their
    # classes' settings
    ("data", MAPPING),
    ("model.task", null_or(MAPPING)),
    # the task's settings where model.task names no class (it follows the data); the task
    # checks both when the model is built, before the run starts (models/_tasks.py)
    ("model.task.monitor", null_or(text("balanced_acc"))),
    ("model.task.class_weights", passed("the task (models/_tasks.py)")),
    ("optimizer", null_or(MAPPING)),
    ("scheduler", null_or(MAPPING)),
    ("model.optimizer", null_or(MAPPING)),
    ("model.scheduler", null_or(MAPPING)),
    # every command's: the run's name, seed, threads and trusted classes
    ("task_name", TASK_NAME),
    ("seed", SEED),
    # train: auto or a count; serve: null (onnxruntime's own choice) or a count
    ("threads", null_or(either(choice("auto"), integer(1, example=2)))),
    ("trusted_classes", CLASS_NAMES),
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
    ("hydra.callbacks.**", passed("Hydra's callbacks (training/_run_start.py)")),
    # trainer/: lightning.Trainer's arguments whose values a type cannot say; the rest are
    # read off its annotations (config/_trainer.py)
    ("trainer.default_root_dir", directory("outputs")),
    ("trainer.accelerator", ACCELERATORS),
    ("trainer.devices", DEVICES),
    ("trainer.precision", PRECISIONS),
    ("trainer.gradient_clip_algorithm", choice("norm", "value")),
    ("trainer.deterministic", either(flag(), choice("warn"))),
    ("trainer.limit_*_batches", null_or(BATCHES)),
    ("trainer.overfit_batches", BATCHES),
    ("trainer.plugins", passed("lightning.Trainer")),
    ("trainer.strategy", either(text("ddp"), MAPPING)),
    ("trainer.strategy.**", passed("the strategy class (trainer.strategy._target_)")),
    # callbacks/ and logger/: one entry each, null turns it off. What the project gives a
    # Lightning callback beyond its own arguments (null: the task's metric and mode) is
    # written here; the rest of a platekit callback's settings are its class's.
    ("callbacks", null_or(MAPPING)),
    ("callbacks.*", null_or(MAPPING)),
    ("callbacks.*.monitor", null_or(text("monitor"))),
    ("callbacks.*.mode", null_or(choice("max", "min"))),
    ("callbacks.model_checkpoint.dirpath", directory("outputs/train/runs/mine/checkpoints")),
    ("callbacks.model_checkpoint.save_top_k", integer(-1, example=1)),
    ("callbacks.early_stopping.patience", integer(0, example=5)),
    ("callbacks.learning_rate_monitor.logging_interval", null_or(choice("epoch", "step"))),
    ("logger", null_or(MAPPING)),
    ("logger.*", null_or(MAPPING)),
    ("logger.*.save_dir", directory("outputs")),
    ("logger.tensorboard.*", passed("lightning's TensorBoardLogger")),
    ("logger.mlflow.*", passed("lightning's MLFlowLogger")),
    ("logger.wandb.*", passed("lightning's WandbLogger")),
    ("**._target_", target()),
)

# Where a config holds a component, and the registry slot its class is resolved in. A
# mapping with a ``_target_`` among a data, model or net component's arguments is a "part".
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("data", "data"),
    ("model", "model"),
    ("model.net", "net"),
    ("model.task", "task"),
    ("model.optimizer", "optimizer"),
    ("model.scheduler", "scheduler"),
    ("optimizer", "optimizer"),
    ("scheduler", "scheduler"),
    ("callbacks.*", "callback"),
    ("logger.*", "logger"),
)
BUILT_BY_HYDRA = ("callback", "logger")  # a class outside the roots is Lightning's or unchecked
# Whose callbacks and loggers are read by their signatures, as the project's own classes.
LIBRARY_ROOTS = ("lightning",)

# Ranges of library classes' parameters, which cannot be annotated where they are declared:
# (module, class) of a base -> parameter -> range. Everything else is declared beside its code.
LIBRARY_RANGES: dict[tuple[str, str], dict[str, Range]] = {
    ("torch.optim.optimizer", "Optimizer"): {
        "lr": Range(above=0.0, example=0.003),
        "weight_decay": Range(low=0.0, example=0.01),
    },
}


@dataclass(frozen=True)
class Component:
    """A config node that builds a class: its path, the class and what the class takes."""

    path: str
    cls: type
    settings: Settings = field(repr=False)
    supplied: frozenset[str] = frozenset()  # arguments the code that builds it passes

    def takes(self, key: str) -> bool:
        """Whether the config may set ``key`` (a setting the builder does not pass itself)."""
        return key in self.settings and key not in self.supplied

    def supplied_line(self, key: str) -> str:
        return (
            f"{self.path}.{key} is given to {self.cls.__name__} by the code that builds it "
            f"({SUPPLIED_BY[self.slot]}); remove it from the command line or config"
        )

    @property
    def slot(self) -> str:
        return next((s for pattern, s in COMPONENTS if _regex(pattern).fullmatch(self.path)), "")

    def rule(self, key: str) -> Rule | None:
        """The rule of ``key``'s value (a declared setting); ``None`` if it says nothing."""
        return setting_rule(self.cls, key)

    def unknown(self, key: str) -> str:
        """The line for a key the class does not take, naming the nearest it does."""
        name = self.cls.__name__
        names = sorted(set(self.settings.named) - self.supplied)
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
        if close:
            known = f"nearest: {', '.join(close)}"
        else:
            known = f"it takes: {', '.join(names[:12])}" if names else "it takes none"
        if self.cls.__module__.partition(".")[0] in LIBRARY_ROOTS:  # not the team's to edit
            return f"{self.path}.{key} is not a setting of {name} ({known}); fix the key"
        return (
            f"{self.path}.{key} is not a setting of {name} ({known}); fix the key, or add "
            f"the parameter to {name}.__init__"
        )


@cache
def setting_rule(cls: type, key: str) -> Rule | None:
    setting = settings_of(cls).named.get(key)
    if setting is None:
        return None
    annotation = setting.annotation
    for base in cls.__mro__:
        declared = LIBRARY_RANGES.get((base.__module__, base.__qualname__), {}).get(key)
        if declared is not None and annotation is not EMPTY:
            annotation = annotated(annotation, declared)
            break
    rule = typed(annotation, setting.default)
    return rule or passed(f"{cls.__name__} (its {key} parameter)")


# The arguments a slot's builder passes itself (``supply``), by slot, and who passes them.
SUPPLIED: dict[str, frozenset[str]] = {}
SUPPLIED_BY: dict[str, str] = {}


def supply(slot: str, names: set[str], by: str) -> None:
    """Declare that the code building ``slot``'s class passes ``names`` itself (the model
    gives its optimizer ``params``): the config may not set them, and no hint offers them."""
    SUPPLIED[slot] = SUPPLIED.get(slot, frozenset()) | names
    SUPPLIED_BY[slot] = by


# A command's own keys, each declared by the module whose code reads it (``declare``): a
# command checks the keys its code reads, and those of the machinery above.
DECLARED: dict[str, Rule] = {}


def declare(rules: Mapping[str, Rule]) -> None:
    """Declare the rules of config keys the calling module reads (dotted path patterns, as
    in ``RULES``; matched before them, in the order declared). Two modules may declare one
    key (``model_path`` for predict and serve) only as the same need."""
    for pattern, rule in rules.items():
        known = DECLARED.setdefault(pattern, rule)
        if known.need != rule.need:
            raise ValueError(f"config key {pattern} declared twice: {known.need} / {rule.need}")


def rule_for(path: str) -> Rule | None:
    """The written-out rule of the config value at dotted ``path``, or ``None``."""
    for pattern, rule in (*DECLARED.items(), *RULES):
        if _regex(pattern).fullmatch(path):
            return rule
    return None


def rule_at(cfg: DictConfig, path: str) -> Rule | None:
    """The rule of the value at ``path`` of ``cfg``: written out, or its component's."""
    rule = rule_for(path) or trainer_rule(path)
    if rule is not None:
        return rule
    found, _ = components(cfg)
    owner = owner_of(path, found)
    if owner is None:
        return None
    key, _, deeper = path[len(owner.path) + 1 :].partition(".")
    return None if deeper or key not in owner.settings else owner.rule(key)


def problems(cfg: DictConfig) -> list[str]:
    """One line per value of ``cfg`` that breaks its rule, in config order.

    A value written as an interpolation (``${seed}``, ``${paths.output_dir}/checkpoints``)
    mostly breaks its rule because a value it refers to does: such lines are left out while
    any value written out is wrong, so each mistake is named once.
    """
    found, refused = components(cfg)
    written: list[str] = list(refused)
    derived: list[str] = []
    for path, raw in leaves(OmegaConf.to_container(cfg, resolve=False)):
        if (unknown_key := unknown_trainer_key(path)) and unknown_key not in written:
            written.append(unknown_key)
            continue
        if beyond_int64(raw):  # no size, count or seed is; torch and numpy overflow on it
            written.append(
                f"{path}={show(raw)}: is beyond any number a run can use (at most 2**63-1); "
                "give a smaller one"
            )
            continue
        rule = rule_for(path) or trainer_rule(path)
        owner = owner_of(path, found) if rule is None else None
        if owner is not None:
            key, _, deeper = path[len(owner.path) + 1 :].partition(".")
            if key in HYDRA_KEYS:  # Hydra's own (_partial_, ...): the builder decides
                continue
            if key in owner.supplied:
                written.append(owner.supplied_line(key))
                continue
            if key not in owner.settings:
                unknown = owner.unknown(key)
                if unknown not in written:
                    written.append(unknown)
                continue
            rule = None if deeper else owner.rule(key)
        if rule is None or rule.checked_elsewhere:
            continue
        line = check(cfg, path, raw, rule)
        if line is not None:
            (derived if isinstance(raw, str) and "${" in raw else written).append(line)
    return written or derived


def components(cfg: DictConfig) -> tuple[dict[str, Component], list[str]]:
    """The components of ``cfg`` by path, and a line for each class the registry refuses."""
    registry = registry_for(cfg)
    found: dict[str, Component] = {}
    refused: list[str] = []
    for path, slot in component_nodes(OmegaConf.to_container(cfg, resolve=False)):
        try:
            name = OmegaConf.select(cfg, f"{path}._target_", throw_on_missing=True)
            cls = registry.resolve(name, slot, "" if path == slot else path)
        except UserError as error:  # Lightning's callbacks and loggers are outside the roots
            if slot not in BUILT_BY_HYDRA or isinstance(error, MovedNameError):
                refused.append(str(error))
            elif (library := library_class(name)) is not None:
                found[path] = Component(path, library, settings_of(library))
            continue
        except Exception:  # an unresolvable _target_: its own rule names it
            continue
        found[path] = Component(path, cls, settings_of(cls), SUPPLIED.get(slot, frozenset()))
    return found, refused


def library_class(name: Any) -> type | None:
    """The class a callback or logger ``_target_`` names in a library of ``LIBRARY_ROOTS``
    (``lightning.pytorch.callbacks.EarlyStopping``); None for any other name."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not DOTTED.fullmatch(name):
        return None
    if name.partition(".")[0] not in LIBRARY_ROOTS:
        return None
    module, _, qualname = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), qualname, None)
    except Exception:  # not importable: Hydra names it when it builds the callback
        return None
    return found if isinstance(found, type) else None


def component_nodes(node: Any, prefix: str = "", inside: str = "") -> Iterator[tuple[str, str]]:
    """``(path, slot)`` of every mapping with a ``_target_`` where a component goes."""
    if not isinstance(node, dict):
        return
    for key, child in node.items():
        path = f"{prefix}{key}"
        slot = next((s for pattern, s in COMPONENTS if _regex(pattern).fullmatch(path)), "")
        if not slot and inside and inside not in BUILT_BY_HYDRA:
            slot = "part"
        builds = isinstance(child, dict) and "_target_" in child
        if slot and builds:
            yield path, slot
        yield from component_nodes(child, f"{path}.", slot if slot and builds else inside)


def owner_of(path: str, found: Mapping[str, Component]) -> Component | None:
    """The innermost component ``path`` lies in."""
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        owner = found.get(".".join(parts[:end]))
        if owner is not None:
            return owner
    return None


def registry_for(cfg: DictConfig) -> Registry:
    """The process's class registry, trusting the config's ``trusted_classes`` too."""
    registry = active()
    try:
        extra = OmegaConf.select(cfg, "trusted_classes", default=None)
        names = [str(name) for name in extra or ()] if OmegaConf.is_list(extra) else []
    except Exception:  # left to its own rule
        names = []
    if not names:
        return registry
    return Registry(trusted=registry.trusted | frozenset(names))


def check(cfg: DictConfig, path: str, raw: Any, rule: Rule) -> str | None:
    """The problem with the value at ``path`` under ``rule``, or ``None``."""
    try:
        value = _plain(OmegaConf.select(cfg, path, throw_on_missing=True))
    except MissingMandatoryValue:
        return f"{path}=???: must be set, to {rule.need} (e.g. {path}={rule.example})"
    except Exception as error:  # any resolver's failure: say which value and why
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"{path}={show(raw)}: cannot be resolved ({lines[0]})"
    return None if rule.ok(value) else complaint(path, value, rule)


def complaint(path: str, value: Any, rule: Rule) -> str:
    """The line for ``path=value`` breaking ``rule``, with a value that meets it."""
    return f"{path}={show(value)}: must be {rule.need} (e.g. {path}={rule.example})"


def beyond_int64(value: Any) -> bool:
    """Whether ``value`` is (or a list holds) an integer no 64-bit integer can hold."""
    if isinstance(value, list):
        return any(beyond_int64(item) for item in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63 - 1


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
