"""Where the Hydra configs live, and how config nodes become objects."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from platekit._errors import UserError
from platekit._files import write_atomic
from platekit._project import current


def config_dir() -> Path:
    """Absolute path of the current project's ``configs/`` (``$CONFIG_DIR`` if set)."""
    return current().config_dir


def to_plain(node: Any) -> Any:
    """Turn OmegaConf nodes into plain dicts and lists (resolved), also inside plain dicts,
    lists and tuples; leave other values alone.

    What reaches a checkpoint must be plain: ``torch.load(weights_only=True)`` refuses a
    pickled ``ListConfig`` (e.g. ``data.features=[a,b]``) and every command then fails.
    """
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    if isinstance(node, dict):
        return {key: to_plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [to_plain(value) for value in node]
    if isinstance(node, tuple):
        return tuple(to_plain(value) for value in node)
    return node


def instantiate_each(group: Mapping[str, Any] | None) -> list[Any]:
    """Build every entry of a group such as ``callbacks`` (``name: {_target_: ...}``).

    Entries set to ``null`` are skipped, so ``callbacks.early_stopping=null`` turns one off.
    """
    if not group:
        return []
    built = []
    for name, node in group.items():
        if node is None:
            continue
        if "_target_" not in node:
            raise UserError(f"config entry '{name}' has no _target_; give it one or set it to null")
        try:
            built.append(instantiate(node))
        except InstantiationException as error:  # Hydra wraps what the constructor raised
            if isinstance(error.__cause__, UserError):
                raise error.__cause__ from None
            raise
    return built


def save_config(cfg: DictConfig) -> Path:
    """Write the resolved config to ``<run dir>/config.yaml``; return the run directory."""
    run_dir = Path(cfg.paths.output_dir)
    text = OmegaConf.to_yaml(cfg, resolve=True)
    write_atomic(run_dir / "config.yaml", lambda tmp: tmp.write_text(text))
    return run_dir
