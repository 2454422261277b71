"""A run's own settings in its checkpoints, so a resume continues the run it interrupts.

Every training checkpoint records what decides what the run computes: the ``trainer.*``
settings but where it runs (``accelerator``, ``devices``, ``num_nodes``, ``strategy``,
``default_root_dir``, ``plugins``), the precision it trained at (resolved, e.g.
``bf16-mixed`` for ``auto``), the seed, and the callbacks that steer training (which
checkpoint is best, when to stop). The schedule and the optimizer are the model's
hyper-parameters. On ``ckpt_path=...`` each comes from the checkpoint unless the command
line names it, which is then said in one line; what only changes speed or output (workers,
logger, progress, checkpoint file names) follows the command.

The values reach the run's config as plain data: numbers, booleans, ``null`` or short text
without ``$``, ``{``, ``}`` or ``\\``, so nothing a file holds can become an interpolation.
A value that is not plain is not used, and that is said.
"""

import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from platekit._errors import UserError
from platekit.checkpoints._integrity import SEALED
from platekit.config._precision import resolve_precision

log = logging.getLogger(__name__)

RECORD_KEY = "run_settings"
# Where a run runs, not what it computes: a resume may move (another machine, more GPUs).
PLACEMENT = frozenset(
    {"accelerator", "devices", "num_nodes", "strategy", "default_root_dir", "plugins"}
)
PRECISION = "precision"  # recorded resolved, apart from the other trainer settings
# The callbacks that steer training, and which of their settings do: {config name: keys}.
STEERING: dict[str, frozenset[str]] = {
    "model_checkpoint": frozenset(
        {"monitor", "mode", "save_top_k", "every_n_epochs", "every_n_train_steps"}
    ),
    "early_stopping": frozenset(
        {
            "monitor",
            "mode",
            "patience",
            "min_delta",
            "check_finite",
            "stopping_threshold",
            "divergence_threshold",
            "check_on_train_epoch_end",
        }
    ),
    "finite_loss": frozenset(),
    "exact_resume": frozenset(),
}
PLAIN_TEXT = re.compile(r"[^${}\\\x00-\x1f\x7f-\x9f]{0,100}")


def record(cfg: DictConfig, precision: str | None = None) -> dict[str, Any]:
    """What a checkpoint of this run records of its settings (see the module's docstring);
    ``precision``: the resolved one (``DescribeCheckpoint`` adds the trainer's)."""
    trainer = plain_mapping(cfg.get("trainer"))
    callbacks = plain_mapping(cfg.get("callbacks"))
    steering: dict[str, Any] = {}
    for name, keys in STEERING.items():
        node = callbacks.get(name)
        steering[name] = (
            None
            if not isinstance(node, dict)
            else {key: value for key, value in node.items() if key in keys and is_plain(value)}
        )
    return {
        PRECISION: precision,
        "seed": cfg.get("seed"),
        "trainer": {
            key: value
            for key, value in trainer.items()
            if key not in PLACEMENT and key != PRECISION and is_plain(value)
        },
        "callbacks": steering,
    }


def is_plain(value: Any) -> bool:
    """A number, boolean, ``None`` or short text that no config reads as an interpolation."""
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and PLAIN_TEXT.fullmatch(value) is not None


def plain_mapping(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    container = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(container, Mapping):
        return {}
    return {str(key): value for key, value in container.items()}


def stored_record(checkpoint: Mapping[str, Any]) -> dict[str, Any] | None:
    """The checkpoint's record of its run settings; None if it has none (platekit < 0.3)."""
    value = checkpoint.get(RECORD_KEY)
    return value if isinstance(value, dict) else None


def keep_recorded_settings(
    cfg: DictConfig, checkpoint: Mapping[str, Any], given: Iterable[str], source: str
) -> None:
    """Set ``cfg``'s trainer, precision, seed and steering callbacks to the checkpoint's own.

    Args:
        cfg: the resumed run's config, changed in place (its ``config.yaml`` records the result).
        given: the keys the command line names (``trainer.max_epochs``, ``callbacks``, ...).
        source: the checkpoint's path, for the messages.
    """
    named = set(given)
    stored = stored_record(checkpoint)
    if stored is not None and not checkpoint.get(SEALED):
        log.warning(
            "%s is not sealed by this project (seal.py): its run settings (length, schedule, "
            "precision, callbacks) are not taken; this resume runs with today's config and "
            "the command line",
            source,
        )
        return
    if stored is None:
        log.warning(
            "%s records no run settings (written before platekit 0.3): this resume takes "
            "trainer.*, the precision and the callbacks from today's config; if they changed "
            "since, the run is not the one interrupted",
            source,
        )
        return
    refused: list[str] = []
    with open_dict(cfg):
        keep_trainer(cfg, stored, named, refused)
        keep_seed(cfg, stored, named, refused)
        keep_callbacks(cfg, stored, named, refused)
        keep_model_settings(cfg, checkpoint, named, refused)
    if refused:
        log.warning(
            "%s: %s not plain values; today's config is used for them",
            source,
            ", ".join(refused),
        )


def keep_trainer(
    cfg: DictConfig, stored: dict[str, Any], named: set[str], refused: list[str]
) -> None:
    """Set ``cfg.trainer`` to the checkpoint's run's settings but those of ``PLACEMENT`` and
    those the command line ``named``; a key the first run left to Lightning's default is
    dropped again. A value that is not plain is left out and added to ``refused``."""
    settings = stored.get("trainer")
    if not isinstance(settings, dict) or "trainer" not in cfg:
        return
    trainer = cfg.trainer
    keep_precision(trainer, stored.get(PRECISION), named)
    for key, value in settings.items():
        name = f"trainer.{key}"
        if not isinstance(key, str) or key in PLACEMENT:
            continue
        if not is_plain(value):
            refused.append(name)
            continue
        take(trainer, key, value, name, named)
    current = plain_mapping(trainer)
    for key in sorted(set(current) - set(settings) - PLACEMENT - {PRECISION}):
        name = f"trainer.{key}"
        if name not in named and is_plain(current[key]):  # the first run had Lightning's default
            log.info("%s dropped: the checkpoint's run did not set it", name)
            del trainer[key]


def keep_precision(trainer: DictConfig, precision: Any, named: set[str]) -> None:
    """The precision the checkpoint trained at, where it runs here; a change is said once the
    trainer is built (:func:`say_precision_change`)."""
    if "trainer.precision" in named or not isinstance(precision, str):
        return
    try:
        resolve_precision(precision, str(trainer.get("accelerator", "auto")))
    except UserError:  # e.g. 16-mixed from a GPU, resumed on a CPU: today's setting holds
        return
    if trainer.get(PRECISION) != precision:
        log.info(
            "trainer.precision=%s from the checkpoint (config: %s)",
            precision,
            trainer.get(PRECISION),
        )
    trainer[PRECISION] = precision


def say_precision_change(checkpoint: Mapping[str, Any], precision: str, source: str) -> None:
    """One line when a resumed run trains at another precision than its checkpoint did."""
    stored = stored_record(checkpoint)
    trained = (stored or {}).get(PRECISION)
    if stored is None:
        log.warning(
            "%s does not record the precision it trained at (platekit < 0.3); this run "
            "trains at %s: if the first did not, the run is no longer bitwise equal to an "
            "uninterrupted one",
            source,
            precision,
        )
    elif trained != precision:
        log.warning(
            "precision %s, but the resumed run trained at %s: the run continues, no longer "
            "bitwise equal to an uninterrupted one",
            precision,
            trained,
        )


def keep_model_settings(
    cfg: DictConfig, checkpoint: Mapping[str, Any], named: set[str], refused: list[str]
) -> None:
    """The optimizer and the lr schedule the checkpoint's model was built with."""
    hparams = checkpoint.get("hyper_parameters")
    if not isinstance(hparams, dict):
        return
    for group in ("optimizer", "scheduler"):
        if group not in cfg or group not in hparams:
            continue
        if any(key == group or key.startswith(f"{group}.") for key in named):
            continue
        value = hparams[group]
        if not is_plain_tree(value):
            refused.append(group)
            continue
        current = plain_mapping(cfg[group]) or None
        if (current or None) != (value or None):
            log.info(
                "%s from the checkpoint: %s (config: %s)",
                group,
                target_of(value),
                target_of(current),
            )
        cfg[group] = value or None


def is_plain_tree(value: Any, depth: int = 0) -> bool:
    """Plain values (:func:`is_plain`) in dicts with plain text keys and lists, 8 levels deep."""
    if depth > 8:
        return False
    if isinstance(value, dict):
        return len(value) <= 64 and all(
            isinstance(key, str) and is_plain(key) and is_plain_tree(item, depth + 1)
            for key, item in value.items()
        )
    if isinstance(value, list):
        return len(value) <= 64 and all(is_plain_tree(item, depth + 1) for item in value)
    return is_plain(value)


def target_of(node: Any) -> str:
    return str(node.get("_target_", "?")).rsplit(".", 1)[-1] if isinstance(node, dict) else "none"


def keep_seed(cfg: DictConfig, stored: dict[str, Any], named: set[str], refused: list[str]) -> None:
    seed = stored.get("seed")
    if "seed" not in cfg or seed is None:
        return
    if not isinstance(seed, int) or isinstance(seed, bool):
        refused.append("seed")
        return
    take(cfg, "seed", seed, "seed", named)


def keep_callbacks(
    cfg: DictConfig, stored: dict[str, Any], named: set[str], refused: list[str]
) -> None:
    """Set the steering callbacks' keys (``STEERING``) to the checkpoint's run's unless the
    command line ``named`` them. One that run had off is turned off; one it had on that
    today's config turns off stays off, with a warning."""
    settings = stored.get("callbacks")
    if not isinstance(settings, dict) or cfg.get("callbacks") is None:
        return
    callbacks = cfg.callbacks
    for name, keys in STEERING.items():
        if name not in settings:
            continue
        prefix = f"callbacks.{name}"
        node, current = settings[name], callbacks.get(name)
        if prefix in named or "callbacks" in named:
            continue
        if node is None and current is not None:
            log.info("%s off, as in the checkpoint's run (config: on)", prefix)
            callbacks[name] = None
            continue
        if current is None:
            if node is not None:
                log.warning(
                    "%s was on in the checkpoint's run but is off in today's config: the "
                    "resumed run continues without it",
                    prefix,
                )
            continue
        if not isinstance(node, dict):
            refused.append(prefix)
            continue
        for key, value in node.items():
            if key not in keys:
                continue
            if not is_plain(value):
                refused.append(f"{prefix}.{key}")
                continue
            take(current, key, value, f"{prefix}.{key}", named)


def take(node: DictConfig, key: str, value: Any, name: str, named: set[str]) -> None:
    """``node[key] = value`` (the checkpoint's) unless the command line names ``name``."""
    current = node.get(key)
    if name in named:
        if current != value:
            log.info(
                "%s=%s given: the resumed run changes it from the checkpoint's %s",
                name,
                current,
                value,
            )
        return
    if current != value:
        log.info("%s=%s from the checkpoint (config: %s)", name, value, current)
    node[key] = value
