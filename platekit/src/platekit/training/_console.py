"""Rich renderings (trees, tables) as plain text, so they go through logging.

Logging writes them to the console and to the run's log file alike: one path for all
user-facing output. What only the record needs (the full config) goes to the log files.
"""

import logging
from io import StringIO
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from rich.console import Console, RenderableType
from rich.text import Text
from rich.tree import Tree

log = logging.getLogger(__name__)

WIDTH = 100


def as_text(renderable: RenderableType, width: int = WIDTH) -> str:
    """Render a rich object to plain text without colour codes."""
    buffer = StringIO()
    Console(file=buffer, width=width, color_system=None, legacy_windows=False).print(renderable)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip().splitlines())


def config_tree(cfg: DictConfig, skip: tuple[str, ...] = ("hydra",)) -> Tree:
    """The resolved config as a tree: one branch per group, leaves ``key: value``."""
    tree = Tree(Text("config"))
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)  # a DictConfig becomes a dict
    for key, value in plain.items():
        if key not in skip:
            _add(tree, key, value)
    return tree


def _add(parent: Tree, key: Any, value: Any) -> None:
    # Text(), not a str: values such as "[a, b]" must not be read as rich markup.
    if isinstance(value, dict) and value:
        branch = parent.add(Text(str(key)))
        for child_key, child in value.items():
            _add(branch, child_key, child)
    else:
        parent.add(Text(f"{key}: {value}"))


@rank_zero_only
def log_config(cfg: DictConfig) -> None:
    """Write the resolved config as a tree to the log files (rank 0 only), not the screen.

    ``config.yaml`` in the run directory holds the same; the screen gets a short header.
    """
    log_to_files(log, as_text(config_tree(cfg)))


def log_to_files(logger: logging.Logger, message: str) -> None:
    """Log ``message`` at INFO to the file handlers ``logger`` reaches, not the console."""
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, (), None)
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if isinstance(handler, logging.FileHandler) and record.levelno >= handler.level:
                handler.handle(record)
        current = current.parent if current.propagate else None


def log_file_names() -> list[str]:
    """The names of the files the root logger writes to (e.g. ``train.log``)."""
    handlers = logging.getLogger().handlers
    return [Path(h.baseFilename).name for h in handlers if isinstance(h, logging.FileHandler)]
