"""Which checkpoint a run resumes from, and which run directory it continues in.

``ckpt_path=last`` means the newest ``last.ckpt`` under ``outputs/<task_name>/runs/``.
A resumed run writes into the run directory its checkpoint came from, so its checkpoints,
metrics and logs continue where they stopped.
"""

import zipfile
from pathlib import Path

from omegaconf import DictConfig

from platekit._errors import UserError

LAST = "last"
CHECKPOINT_DIR = "checkpoints"  # <run>/checkpoints/ (configs/callbacks: model_checkpoint.dirpath)
LAST_FILE = "last.ckpt"


def last_checkpoint_of(run_dir: Path) -> Path:
    """Where a run keeps its newest state: ``<run>/checkpoints/last.ckpt``."""
    return run_dir / CHECKPOINT_DIR / LAST_FILE


def find_last_checkpoint(runs_dir: Path) -> Path | None:
    """The most recently written ``<run>/checkpoints/last.ckpt`` under ``runs_dir``."""
    found = list(runs_dir.glob(f"*/{CHECKPOINT_DIR}/{LAST_FILE}"))
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def runs_dir_of(cfg: DictConfig) -> Path:
    return Path(cfg.paths.log_dir) / cfg.task_name / "runs"


def resume_path(cfg: DictConfig) -> Path | None:
    """``cfg.ckpt_path`` as a file path (``last`` looked up); ``None`` for a fresh run."""
    if cfg.get("ckpt_path") is None:
        return None
    if str(cfg.ckpt_path) != LAST:
        return Path(cfg.ckpt_path)
    runs_dir = runs_dir_of(cfg)
    last = find_last_checkpoint(runs_dir)
    if last is None:
        raise UserError(
            f"ckpt_path=last found no {last_checkpoint_of(runs_dir / '*')}; train once "
            "without ckpt_path, or pass the checkpoint's path"
        )
    return last


def run_dir(ckpt_path: str | None, fresh_dir: str) -> str:
    """Hydra resolver for ``hydra.run.dir``: the resumed run's directory, else ``fresh_dir``.

    ``fresh_dir`` is ``<runs_dir>/<time>``; a checkpoint at ``<run>/checkpoints/*.ckpt``
    resumes in ``<run>``. Anything else (no file, a file elsewhere, a truncated or corrupt
    file) starts ``fresh_dir``.
    """
    if ckpt_path is None:
        return fresh_dir
    if str(ckpt_path) == LAST:
        path = find_last_checkpoint(Path(fresh_dir).parent)
    else:
        path = Path(ckpt_path)
    # A broken file gets a fresh directory, so the run it came from is left untouched.
    if path is None or path.parent.name != CHECKPOINT_DIR or not zipfile.is_zipfile(path):
        return fresh_dir
    return str(path.parent.parent)
