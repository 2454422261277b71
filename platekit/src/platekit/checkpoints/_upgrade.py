"""Read a checkpoint written by platekit 0.1 in today's metric names.

platekit 0.1 logged one classification accuracy, ``acc``, which was the mean over classes
of each class's recall. It is now ``balanced_acc``; ``acc`` is the plain share of samples
predicted right. A 0.1 checkpoint of a classification (one without the training epoch's
running sums, which every later checkpoint holds) is read as if written today:

- its history rows' ``<stage>/acc`` become ``<stage>/balanced_acc``;
- its task monitors ``balanced_acc``, as the run did, and the best-checkpoint and
  early-stopping states keep their scores under that name.

A resumed 0.1 run so goes on picking checkpoints by the figure it picked them by; its
earlier epochs have no plain ``acc`` (it was never computed).
"""

import logging
from typing import Any

log = logging.getLogger(__name__)

EPOCH_SUMS_KEY = "train_epoch_sums"  # models/_task_module.py writes it in every checkpoint
OLD, NEW = "acc", "balanced_acc"
STAGES = ("train", "val", "test")


def upgrade(checkpoint: dict[str, Any]) -> bool:
    """Rename a 0.1 classification checkpoint's accuracy in place; True if it was one."""
    task = (checkpoint.get("hyper_parameters") or {}).get("task")
    if EPOCH_SUMS_KEY in checkpoint or not isinstance(task, dict):
        return False
    if not str(task.get("_target_", "")).endswith(".Classification") or "monitor" in task:
        return False
    callbacks = checkpoint.get("callbacks")
    if not isinstance(callbacks, dict) or any(NEW in str(key) for key in callbacks):
        return False
    task["monitor"] = NEW
    old_names = {f"{stage}/{OLD}": f"{stage}/{NEW}" for stage in STAGES}
    quoted = {f"'{old}'": f"'{new}'" for old, new in old_names.items()}
    upgraded: dict[Any, Any] = {}
    for key, state in callbacks.items():
        for old, new in quoted.items():
            key = key.replace(old, new) if isinstance(key, str) else key
        if isinstance(state, dict):
            if state.get("monitor") in old_names:
                state["monitor"] = old_names[state["monitor"]]
            for row in state.get("epochs", []) if isinstance(state.get("epochs"), list) else []:
                for old, new in old_names.items():
                    if isinstance(row, dict) and old in row:
                        row[new] = row.pop(old)
        upgraded[key] = state
    checkpoint["callbacks"] = upgraded
    log.info(
        "checkpoint written by platekit 0.1: its `acc` (the mean recall over classes) is "
        "read as `balanced_acc`, which this run monitors as the checkpoint's run did"
    )
    return True
