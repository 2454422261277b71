"""Plain ``nn.Module`` networks. They know nothing about Lightning or the data."""

from collections.abc import Sequence

from torch import Tensor, nn


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 convolution (same padding) -> batch norm -> ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """Two conv stages with a 2x2 pool between them, global average pool, linear head."""

    def __init__(
        self,
        num_classes: int,
        in_channels: int = 1,
        channels: Sequence[int] = (32, 64),
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        first, second = channels
        self.features = nn.Sequential(
            conv_block(in_channels, first),
            conv_block(first, first),
            nn.MaxPool2d(2),
            conv_block(first, second),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(second, num_classes))

    def forward(self, images: Tensor) -> Tensor:
        # images: (B, C, H, W) -> features: (B, channels[-1]) -> logits: (B, num_classes)
        return self.head(self.features(images))


class MLP(nn.Module):
    """Flatten the image, then hidden layers of Linear -> ReLU -> Dropout."""

    def __init__(
        self,
        num_classes: int,
        in_features: int = 64,
        hidden: Sequence[int] = (256, 128),
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, num_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, images: Tensor) -> Tensor:
        # images: (B, C, H, W) -> (B, C*H*W) -> logits: (B, num_classes)
        return self.layers(images)
