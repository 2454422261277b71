"""The sequence example: token sequences of length 5 to 40, three classes, generated offline.

Each sequence is drawn from a fixed seed, so every machine gets the same data set with no
download. A sequence of class ``k`` draws each token from class ``k``'s group of tokens
with probability ``bias``, else from all tokens; short sequences are harder to classify,
so the net must read each sequence to its own end (the padding after it says where).
"""

from pathlib import Path
from typing import Annotated, Any

import torch

from platekit.data._base import BaseDataModule, Rows
from platekit.data._info import DataInfo
from platekit.settings import Range

CLASS_NAMES = ("low", "mid", "high")  # which group of token ids a sequence favours
DATA_SEED = 20_231_117  # the data set is fixed; ``seed`` moves the split and order only


class SequenceDataModule(BaseDataModule):
    """Token sequences ``(N, L)`` of ids ``1..tokens``, padded with 0 up to ``max_length``.

    Args:
        size: number of sequences.
        min_length, max_length: the range of lengths (``max_length`` is the model's limit).
        tokens: distinct token ids (1..tokens; 0 pads); a multiple of the 3 classes.
        bias: share of a sequence's tokens drawn from its class's group.
    """

    input_name = "tokens"
    padding_value = 0.0

    def __init__(
        self,
        size: Annotated[int, Range(low=30)] = 1500,
        min_length: Annotated[int, Range(low=1)] = 5,
        max_length: Annotated[int, Range(low=1)] = 40,
        tokens: Annotated[int, Range(low=3)] = 12,
        bias: Annotated[float, Range(low=0, high=1)] = 0.4,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("normalize", "none")
        super().__init__(**kwargs)

    def varying_axes(self) -> dict[int, int | None]:
        return {0: self.hparams.max_length}

    def vocab_size(self) -> int:
        return int(self.hparams.tokens) + 1  # the ids and the padding id 0

    def read(self) -> Rows:
        settings = self.hparams
        if not settings.min_length <= settings.max_length or settings.tokens % 3:
            from platekit._errors import UserError

            raise UserError(
                f"data.min_length={settings.min_length}, max_length={settings.max_length}, "
                f"tokens={settings.tokens}: need min_length <= max_length and tokens a "
                "multiple of 3"
            )
        generator = torch.Generator().manual_seed(DATA_SEED)
        group = settings.tokens // 3
        labels = torch.randint(0, 3, (settings.size,), generator=generator)
        lengths = torch.randint(
            settings.min_length, settings.max_length + 1, (settings.size,), generator=generator
        )
        sequences = []
        for label, length in zip(labels.tolist(), lengths.tolist(), strict=True):
            anywhere = torch.randint(1, settings.tokens + 1, (length,), generator=generator)
            in_group = 1 + label * group + torch.randint(0, group, (length,), generator=generator)
            favoured = torch.rand(length, generator=generator) < settings.bias
            sequences.append(torch.where(favoured, in_group, anywhere).float())
        return Rows(sequences, labels, class_names=CLASS_NAMES)

    def describe_input(self, info: DataInfo) -> str:
        return (
            f"float32 (N, L<={self.hparams.max_length}): token ids 1..{self.hparams.tokens} "
            "of sequences of length 1 or more, each padded with 0 after its end (or a list "
            "per row in JSON, or a padded array plus lengths in .npz)"
        )

    @classmethod
    def make_fixture(cls, directory: Path) -> dict[str, Any]:
        return {"size": 300}  # generated: no files
