"""A resumed run keeps the settings that fix its data split and its batch order.

The checkpoint's data card holds the data module's settings (seed, split fractions, the
data source, the batch size, ...). On ``ckpt_path=...`` they are taken from the checkpoint:

- a setting whose config default differs (the YAML changed since) is taken from the
  checkpoint, with an info line: a default is not a decision;
- a setting given on the command line with another value is refused in one line naming
  both values and how to start a new run from the checkpoint instead (``init_from=``).

Only how the data is loaded (workers, evaluation batch size, folders) may change.
"""

import logging
import re
from collections.abc import Sequence
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from platekit._errors import UserError
from platekit._registry import active
from platekit.checkpoints._card import DATA_KEY, MODEL_KEY
from platekit.checkpoints._integrity import SEALED
from platekit.checkpoints._restore import data_paths

log = logging.getLogger(__name__)

# Data settings that change how batches are loaded, not which rows or in which order.
LOADING_ONLY = frozenset(
    {"num_workers", "eval_batch_size", "data_dir", "pin_memory", "persistent_workers"}
)


def command_line_overrides() -> list[str]:
    """The overrides typed on this run's command line; none outside a Hydra command."""
    if not HydraConfig.initialized():
        return []
    return list(HydraConfig.get().overrides.task)


def override_key(override: str) -> str:
    """``+data.seed=3`` -> ``data.seed``; ``data=csv`` -> ``data``."""
    return override.partition("=")[0].lstrip("+~")


def keep_run_settings(
    cfg: DictConfig, checkpoint: dict[str, Any], overrides: Sequence[str], source: str
) -> None:
    """Set ``cfg.data`` (and ``cfg.seed``) to the resumed checkpoint's own; refuse explicit changes.

    Args:
        cfg: the run's config, changed in place.
        checkpoint: the loaded checkpoint being resumed.
        overrides: the explicit overrides of this run (``command_line_overrides()`` in a
            command; a test passes the list it composed with).
        source: the checkpoint's path, for the messages.
    """
    card = checkpoint.get(DATA_KEY)
    if not card or "data" not in cfg:
        return
    given = {override_key(override) for override in overrides}
    stored_target, stored = card["_target_"], dict(card.get("args", {}))
    named = {key.removeprefix("data."): None for key in given if key.startswith("data.")}
    kept = {key: value for key, value in stored.items() if key not in LOADING_ONLY}
    stored.update(data_paths(kept, named, source, sealed=bool(checkpoint.get(SEALED))))
    current = OmegaConf.to_container(cfg.data, resolve=True)
    assert isinstance(current, dict)  # cfg.data is a mapping
    if not same_class(current.get("_target_"), stored_target):
        if "data" in given:
            refuse("data", current.get("_target_"), stored_target, source, overrides)
        log.info(
            "data module %s from the checkpoint (config: %s)",
            stored_target,
            current.get("_target_"),
        )
        with open_dict(cfg):
            cfg.data = literal({"_target_": stored_target, **stored})
        keep_seed(cfg, stored)
        return
    for key, old in stored.items():
        # a setting today's config does not name (a newer default) is the checkpoint's
        if key in LOADING_ONLY or current.get(key) == old or key not in current:
            continue
        explicit = {f"data.{key}", "data"} | ({"seed"} if key == "seed" else set())
        if given & explicit:
            name = "seed" if key == "seed" and "seed" in given else f"data.{key}"
            refuse(name, current.get(key), old, source, overrides)
        log.info("data.%s=%s from the checkpoint (config default: %s)", key, old, current.get(key))
    with open_dict(cfg):
        for key, old in stored.items():
            if key not in LOADING_ONLY:
                cfg.data[key] = literal(old)
    keep_seed(cfg, stored)


def keep_model(
    cfg: DictConfig, checkpoint: dict[str, Any], overrides: Sequence[str], source: str
) -> None:
    """A resume given no ``model`` settings keeps the checkpoint's net and task.

    Like the data module, the model a run trained is the checkpoint's: ``ckpt_path=last``
    alone must not build the config's default net for another run's data. A ``model=`` or
    ``model.*`` on the command line is the user's choice and is left as given (its weights
    must then fit the checkpoint, checked when it is built).
    """
    stored = checkpoint.get("hyper_parameters") or {}
    target = (checkpoint.get(MODEL_KEY) or {}).get("_target_")
    if "model" not in cfg or not target or "net" not in stored:
        return
    if any(override_key(o) == "model" or override_key(o).startswith("model.") for o in overrides):
        return
    kept = {"_target_": target, "net": stored["net"], "task": stored.get("task")}
    if OmegaConf.to_container(cfg.model, resolve=True) != kept:
        log.info("model from the checkpoint: %s", stored["net"].get("_target_"))
    with open_dict(cfg):
        cfg.model = literal(kept)


def refuse_ignored_optimizer_settings(
    cfg: DictConfig, checkpoint: dict[str, Any], overrides: Sequence[str], source: str
) -> None:
    """An explicit ``optimizer.<key>=`` on a resume would be ignored: refuse it in one line.

    A resumed run restores its optimizer's state (learning rate and weight decay of each
    parameter group included) from the checkpoint, so a new value would silently not apply.
    A value equal to the checkpoint's, or one left at the config's default, passes.
    """
    stored = (checkpoint.get("hyper_parameters") or {}).get("optimizer") or {}
    if "optimizer" not in cfg or not stored:
        return
    current = OmegaConf.to_container(cfg.optimizer, resolve=True)
    assert isinstance(current, dict)  # cfg.optimizer is a mapping
    for override in overrides:
        key = override_key(override)
        if key == "optimizer" or (key.startswith("optimizer.") and "." not in key[10:]):
            name = key.removeprefix("optimizer.") if key != "optimizer" else "_target_"
            if current.get(name) != stored.get(name):
                raise UserError(
                    f"{override} but the checkpoint '{source}' restores its optimizer "
                    f"({key}={stored.get(name)}): on a resume the new value would be ignored; "
                    f"drop it to resume, or start a new run from its weights with "
                    f"init_from={source} {override}"
                )


# Callback settings whose value a resume takes from the checkpoint's callback state, so a new
# value would not apply: {config key: (the state's key prefix, the state's field)}. Lightning's
# EarlyStopping restores its patience with its wait count. (trainer.max_epochs, the schedule's
# settings and model/data settings are applied or refused elsewhere.)
RESTORED_CALLBACK_SETTINGS = {
    "callbacks.early_stopping.patience": ("EarlyStopping", "patience"),
}


def refuse_ignored_callback_settings(
    checkpoint: dict[str, Any], overrides: Sequence[str], source: str
) -> None:
    """An explicit callback setting a resume restores from the checkpoint: refuse it in one line.

    A value equal to the checkpoint's passes; so does any value when the checkpoint holds no
    state of that callback (it was off in the first run, and starts fresh now).
    """
    states = checkpoint.get("callbacks") or {}
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key not in RESTORED_CALLBACK_SETTINGS:
            continue
        prefix, field_name = RESTORED_CALLBACK_SETTINGS[key]
        stored = [
            state[field_name]
            for name, state in states.items()
            if str(name).startswith(prefix) and isinstance(state, dict) and field_name in state
        ]
        if stored and str(stored[0]) != value.strip():
            raise UserError(
                f"{override} but the checkpoint '{source}' restores its {prefix} state "
                f"({key}={stored[0]}): on a resume the new value would be ignored; drop it to "
                f"resume, or start a new run from its weights with init_from={source} {override}"
            )


def same_class(target: Any, other: str) -> bool:
    """Whether two ``_target_`` strings name one class (``data.X`` is ``data.module.X``).

    ``other`` (the checkpoint's) was resolved by the registry when the checkpoint was read.
    """
    if target == other:
        return True
    try:
        return active().resolve(target, "data") is active().resolve(other, "data")
    except UserError:  # a target the registry does not build is not the same
        return False


def literal(value: Any) -> Any:
    """A checkpoint's value made safe to put into a config: it resolves to itself.

    OmegaConf reads ``\\${`` as a literal ``${`` and ``\\\\`` before one as a literal
    backslash, so each backslash run before ``${`` is doubled and one more added: a stored
    ``\\${oc.env:X}`` stays that text (escaping only ``${`` made it a backslash and a live
    interpolation, which read the environment).
    """
    if isinstance(value, str):
        return INTERPOLATION.sub(lambda found: found.group(1) * 2 + "\\${", value)
    if isinstance(value, dict):
        return {key: literal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [literal(item) for item in value]
    return value


INTERPOLATION = re.compile(r"(\\*)\$\{")  # a ${ and the backslashes before it


def keep_seed(cfg: DictConfig, stored: dict[str, Any]) -> None:
    """The run's ``seed`` as its data was split with, so its config.yaml says what happened."""
    if "seed" in stored and "seed" in cfg:
        cfg.seed = stored["seed"]


def refuse(name: str, new: Any, old: Any, source: str, overrides: Sequence[str]) -> None:
    typed = next((o for o in overrides if override_key(o) == name), f"{name}={new}")
    raise UserError(
        f"{typed} but the checkpoint '{source}' was trained with {name}={old}: a resumed run "
        f"keeps the settings that fix its data split and batch order; drop {typed} to resume, "
        f"or start a new run from its weights with init_from={source} {typed}"
    )
