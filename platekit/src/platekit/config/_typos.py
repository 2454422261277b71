"""Nearest valid names for a mistyped config key or group option."""

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

_ABSENT = object()

# Keys that moved: old prefix -> (new prefix, or None where the key is gone; why)
MOVED = {
    "model.optimizer": ("optimizer", "the optimizer is a config group: optimizer=adamw|adam|sgd"),
    "model.scheduler.T_max": (None, "a schedule's length follows the run (trainer.max_epochs)"),
    "model.scheduler": ("scheduler", "the lr schedule is a config group: scheduler=cosine|..."),
    "model.num_classes": ("model.task.num_classes", "it follows the data; usually leave it out"),
}


def moved_key(key: str) -> str | None:
    """A hint naming the new key of a key that moved, e.g. ``model.optimizer.lr``."""
    for old, (new, why) in MOVED.items():
        if key == old or key.startswith(f"{old}."):
            if new is None:
                return f"key '{key}' is gone: {why}"
            return f"key '{key}' has moved to '{new}{key[len(old) :]}' ({why})"
    return None


def nearest_names(config_dir: Path, config_name: str, overrides: list[str]) -> list[str]:
    """One line per override that names no key or option, with the closest valid names."""
    groups = {p.parent.relative_to(config_dir).as_posix() for p in config_dir.rglob("*.yaml")}
    groups -= {".", "hydra"}
    hints, choices, keys = [], [], []
    for override in overrides:
        key, equals, value = override.partition("=")
        if not equals or override.startswith(("-", "+", "~")) or key.startswith("hydra"):
            continue
        if hint := moved_key(key):
            hints.append(hint)
        elif key in groups:
            options = sorted(p.stem for p in (config_dir / key).glob("*.yaml"))
            if value in options or value == "null":
                choices.append(override)
            else:
                hints.append(_hint(f"option '{value}' of group '{key}'", value, options))
        else:
            keys.append(key)
    if keys:
        cfg = _compose(config_dir, config_name, choices)
        known = sorted({*_dotted(OmegaConf.to_container(cfg)), *groups, *declared(cfg)})
        for key in keys:
            if not has_key(cfg, key) and key not in known:  # a declared setting is a key
                # Names as deep as the typed one: a key's value fits them, not a group's
                # option or a parent's mapping (``optimizer.l=0.01`` is not ``optimizer=``).
                level = [name for name in known if name.count(".") == key.count(".")]
                hints.append(_hint(f"key '{key}'", key, level))
    return hints


def declared(cfg: Any) -> list[str]:
    """The settings each component of ``cfg`` declares, those its config file leaves out too."""
    from platekit.config._schema import components  # imports each component's module

    try:
        found, _ = components(cfg)
    except Exception:  # hints are a courtesy
        return []
    return [f"{path}.{name}" for path, part in found.items() for name in part.settings.named]


def has_key(cfg: Any, key: str) -> bool:
    """Whether dotted ``key`` names a key of ``cfg``, one whose value is ``???`` included.

    (``OmegaConf.select(cfg, key, default=...)`` returns the default for a ``???`` value.)
    """
    node = cfg
    for part in key.split("."):
        # `part in node` would be False for a ??? value, so ask for the keys
        in_dict = OmegaConf.is_dict(node) and part in node.keys()  # noqa: SIM118
        in_list = OmegaConf.is_list(node) and part.isdigit() and int(part) < len(node)
        if not (in_dict or in_list):
            return False
        node = OmegaConf.select(node, part, throw_on_missing=False)
    return True


def _hint(what: str, typed: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(typed, valid, n=3, cutoff=0.6)
    if close:
        return f"no {what}; did you mean: {', '.join(close)}?"
    if not valid:
        return f"no {what} in this command's config"
    return f"no {what}; valid: {', '.join(valid[:20])}"


def _compose(config_dir: Path, config_name: str, overrides: list[str]) -> Any:
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir)):
        return compose(config_name=config_name, overrides=overrides)


def _dotted(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key path of ``node`` an override can name: a key holding a dot
    (``optimizer.lr:`` under ``sweep.params``) cannot be, so neither it nor what is under it."""
    if isinstance(node, dict):
        for name, child in node.items():
            if not isinstance(name, str) or "." in name:
                continue
            path = f"{prefix}{name}"
            yield path
            yield from _dotted(child, f"{path}.")
