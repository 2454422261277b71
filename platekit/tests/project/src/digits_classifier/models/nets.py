"""Plain ``nn.Module`` networks. They know nothing about Lightning or the data.

Their sizes come from the data: a net that takes ``input_shape`` (one input's shape) and
``num_outputs`` (classes, or 1 for a regression) gets them filled in by the model builder,
so a model config names only its own choices (widths, dropout).

Each ``__init__`` parameter is a setting a config may give (``model.net.dropout=0.2``): its
annotation is the type a value must have, and a ``Range`` beside it bounds it
(``platekit.settings``). A key no parameter takes is refused before the run starts.
"""

import math
from collections.abc import Sequence
from typing import Annotated

from platekit.settings import Range
from torch import Tensor, nn


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 convolution (same padding) -> batch norm -> ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class GlobalAvgPool(nn.Module):
    """(B, C, H, W) -> (B, C): the mean over height and width.

    A plain mean, not ``nn.AdaptiveAvgPool2d(1)``: that one's CUDA backward has no
    deterministic kernel, so ``trainer.deterministic=true`` would stop training on a GPU.
    """

    def forward(self, features: Tensor) -> Tensor:
        return features.mean(dim=(-2, -1))


class SmallCNN(nn.Module):
    """Two conv stages with a 2x2 pool between them, global average pool, linear head."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_outputs: int,
        channels: Sequence[int] = (32, 64),
        dropout: Annotated[float, Range(low=0, below=1)] = 0.1,
    ) -> None:
        super().__init__()
        first, second = channels
        self.features = nn.Sequential(
            conv_block(input_shape[0], first),
            conv_block(first, first),
            nn.MaxPool2d(2),
            conv_block(first, second),
            GlobalAvgPool(),
        )
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(second, num_outputs))

    def forward(self, images: Tensor) -> Tensor:
        # images: (B, C, H, W) -> features: (B, channels[-1]) -> outputs: (B, num_outputs)
        return self.head(self.features(images))


class MLP(nn.Module):
    """Flatten the input, then hidden layers of Linear -> ReLU -> Dropout."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_outputs: int,
        hidden: Sequence[int] = (256, 128),
        dropout: Annotated[float, Range(low=0, below=1)] = 0.1,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, num_outputs))
        self.layers = nn.Sequential(*layers)

    def forward(self, inputs: Tensor) -> Tensor:
        # inputs: (B, *input_shape) -> (B, prod(input_shape)) -> outputs: (B, num_outputs)
        return self.layers(inputs)
