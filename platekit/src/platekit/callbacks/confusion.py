"""The confusion matrix of the test split, for the plots."""

from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer
from torch import Tensor
from torchmetrics.classification import MulticlassConfusionMatrix


class TestConfusionMatrix(Callback):
    """Count (true class, predicted class) pairs over the test split, on every rank.

    It runs the model on each test batch a second time (test only, under no_grad), so
    the LightningModule needs no extra code. ``matrix[i, j]`` counts class ``i``
    predicted as ``j``, summed over ranks.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.matrix: Tensor | None = None
        self._metric: MulticlassConfusionMatrix | None = None

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._metric = MulticlassConfusionMatrix(self.num_classes).to(pl_module.device)

    @torch.no_grad()
    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: tuple[Tensor, Tensor],
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        inputs, targets = batch
        assert self._metric is not None  # made by on_test_epoch_start
        self._metric.update(pl_module(inputs).argmax(dim=1), targets)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        assert self._metric is not None
        self.matrix = self._metric.compute().cpu()  # an all-reduce across ranks
        self._metric = None
