"""A net for variable-length sequences: embedding (or projection), GRU, the state at each end.

Inputs arrive padded along their length with the data's ``padding_value``; the net finds
each sequence's length from that padding and reads the GRU's output at the sequence's own
last step. The GRU runs forward only, so that output depends on the real steps alone:
the same sequence gives the same answer however far it is padded, in PyTorch and in the
exported ONNX graph (whose length axis is dynamic).
"""

from collections.abc import Sequence
from typing import Annotated

import torch
from torch import Tensor, nn

from platekit.settings import Range


class SequenceGRU(nn.Module):
    """Tokens ``(B, L)`` through an embedding, or vectors ``(B, L, F)`` through a linear
    projection, then a GRU; its output at each sequence's last step feeds a linear head."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_outputs: int,
        vocab_size: int | None = None,
        padding_value: float = 0.0,
        embedding_dim: Annotated[int, Range(low=1)] = 32,
        hidden: Annotated[int, Range(low=1)] = 64,
        layers: Annotated[int, Range(low=1)] = 1,
        dropout: Annotated[float, Range(low=0, below=1)] = 0.1,
    ) -> None:
        super().__init__()
        self.tokens = vocab_size is not None
        self.padding_value = float(padding_value)
        if vocab_size is not None:
            self.embed: nn.Module = nn.Embedding(
                vocab_size, embedding_dim, padding_idx=int(padding_value)
            )
        else:  # (L, F) vectors per step
            self.embed = nn.Linear(input_shape[-1], embedding_dim)
        self.gru = nn.GRU(
            embedding_dim,
            hidden,
            num_layers=layers,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, num_outputs))

    def forward(self, inputs: Tensor) -> Tensor:
        # inputs: (B, L) token ids or (B, L, F), padded -> outputs: (B, num_outputs)
        if inputs.ndim != (2 if self.tokens else 3):
            raise ValueError(
                f"SequenceGRU takes (B, L) token ids (data with a vocab_size) or (B, L, F) "
                f"vectors, got {tuple(inputs.shape)}"
            )
        padding = inputs == self.padding_value
        if self.tokens:
            steps = self.embed(inputs.long())  # (B, L, E)
        else:
            padding = padding.all(dim=-1)
            steps = self.embed(inputs)
        lengths = (~padding).sum(dim=1).clamp(min=1)  # (B,): padding only ever trails
        outputs, _ = self.gru(steps)  # (B, L, H)
        last = (lengths - 1).view(-1, 1, 1).expand(-1, 1, outputs.shape[-1])
        return self.head(torch.gather(outputs, 1, last).squeeze(1))  # (B, H) -> (B, outputs)
