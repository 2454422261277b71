"""The model as shipped: raw inputs in, predictions out, normalisation inside.

Training sees inputs normalised with the train split's statistics (tensors of any shape
that broadcasts over one input). The shipped model applies them itself, so a user feeds
the raw inputs the data module reads (``BaseDataModule.raw_inputs``).
"""

from torch import Tensor, nn

from platekit.checkpoints._restore import Checkpoint


class RawInputModel(nn.Module):
    """``net`` behind a fixed ``(x - mean) / std``; logits and probabilities, or values."""

    mean: Tensor  # buffers, registered in __init__
    std: Tensor

    def __init__(self, net: nn.Module, mean: Tensor, std: Tensor, target_kind: str) -> None:
        super().__init__()
        self.net = net
        self.classify = target_kind == "class"
        # Buffers, not Python floats, so they are constants in the exported graph.
        self.register_buffer("mean", mean.detach().clone().float())
        self.register_buffer("std", std.detach().clone().float())

    def forward(self, inputs: Tensor) -> tuple[Tensor, ...]:
        # inputs: (B, *input_shape) raw -> outputs: (B, num_outputs)
        outputs = self.net((inputs - self.mean) / self.std)
        if self.classify:
            return outputs, outputs.softmax(dim=-1)
        return (outputs,)


def from_checkpoint(checkpoint: Checkpoint) -> RawInputModel:
    """The checkpoint's net with its normalisation baked in, in eval mode on CPU."""
    model = checkpoint.model()
    net = getattr(model, "net", model)
    mean, std = checkpoint.normalization
    return RawInputModel(net, mean, std, checkpoint.info.target_kind).eval()
