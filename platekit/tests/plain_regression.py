"""Plain LightningDataModules (no project base) with other targets: a regression of sliding
windows, two-column targets, a net that returns a tuple."""

import torch
from lightning import LightningDataModule
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Windows(LightningDataModule):
    """The next value of a noisy sine from the 8 before it: one real target per row."""

    target_kind = "value"

    def __init__(self, batch_size: int = 32, columns: int = 1) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(0)
        series = torch.sin(torch.arange(600) / 8) + 0.05 * torch.randn(600, generator=generator)
        inputs = torch.stack([series[i : i + 8] for i in range(590)])
        targets = series[8:598]
        if self.hparams.columns > 1:  # several targets per row: refused, named
            targets = torch.stack([targets] * self.hparams.columns, dim=1)
        self.parts = torch.utils.data.random_split(
            TensorDataset(inputs, targets), [470, 60, 60], torch.Generator().manual_seed(0)
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.parts[0], batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.parts[1], batch_size=128)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.parts[2], batch_size=128)


class LongPairs(Windows):
    """Two class-index columns per row, no target kind declared."""

    target_kind = None
    num_classes = 3

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        inputs = torch.randn(300, 8, generator=torch.Generator().manual_seed(0))
        targets = torch.randint(0, 3, (300, 2), generator=torch.Generator().manual_seed(1))
        self.parts = torch.utils.data.random_split(
            TensorDataset(inputs, targets), [240, 30, 30], torch.Generator().manual_seed(0)
        )


class TupleNet(nn.Module):
    """Returns (logits, features): a net must return one tensor."""

    def __init__(self, input_shape: list[int], num_outputs: int) -> None:
        super().__init__()
        self.layer = nn.Linear(int(torch.tensor(input_shape).prod()), num_outputs)

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = inputs.flatten(1)
        return self.layer(flat), flat
