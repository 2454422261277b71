"""A callback the distributed tests add to real runs: it records what each rank saw.

Each rank writes its own files to ``out_dir``: the training inputs of every epoch, in order
(``inputs_rank<r>_epoch<e>.pt``), and at the end of fit its weights and the validation
metrics it was given (``final_rank<r>.pt``).
"""

from pathlib import Path
from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer
from torch import Tensor


class RankProbe(Callback):
    def __init__(self, out_dir: str) -> None:
        self.out_dir = Path(out_dir)
        self.inputs: list[Tensor] = []
        self.val: dict[str, float] = {}

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.inputs = []

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.inputs.append(batch[0].detach().cpu().clone())

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        name = f"inputs_rank{trainer.global_rank}_epoch{trainer.current_epoch}.pt"
        self.save(torch.cat(self.inputs), name)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        metrics = trainer.callback_metrics
        self.val = {k: float(metrics[k]) for k in ("val/acc", "val/loss") if k in metrics}

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        final = {"state_dict": pl_module.state_dict(), "val": self.val}
        self.save(final, f"final_rank{trainer.global_rank}.pt")

    def save(self, data: Any, name: str) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        torch.save(data, self.out_dir / name)
