"""A fixed-size fingerprint of the rows of a split, so a checkpoint knows its data.

Per split: the row count, a SHA-256 over the rows' 64-bit hashes in split order, and an
order-free sum of those hashes, so a changed split is named by what differs: "count",
"order" (the same rows, another order) or "content". About 120 bytes per split. A row's hash
covers its raw input as the data module gives it (a table's encoded features, so gap fills
or categories learnt anew show as content) and its target; a file (an image folder's) is
hashed by its bytes, read without decoding. The row hash is a 64-bit multiply-xor over the
row's words: it catches any accidental change, not a crafted collision (whoever can write
the data can change the model's answers anyway).
"""

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

ROWS, ORDERED, UNORDERED = "rows", "sha256", "set"
HASH_BLOCK = 1 << 18  # about this many values of the inputs hashed at a time
# A row hash: per 64-bit word, xor it in, multiply by an odd constant, fold the high bits.
SEED, MULTIPLIER, SHIFT = (
    np.uint64(0x243F6A8885A308D3),
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(29),
)


def tensor_row_hashes(inputs: Tensor, targets: Tensor) -> np.ndarray:
    """``(N,)`` uint64: one hash per row of ``inputs`` ``(N, ...)`` with its target, hashed a
    block of rows at a time (no copy of the inputs)."""
    flat = inputs.detach().cpu().reshape(len(inputs), -1)
    labels = targets.detach().cpu().reshape(len(targets), -1)
    value = np.full(len(labels), SEED, dtype=np.uint64)
    rows = max(1, HASH_BLOCK // max(flat.shape[1], 1))
    for start in range(0, len(labels), rows):
        block = slice(start, start + rows)
        hash_rows(value[block], flat[block].float(), labels[block].double())
    return value


def hash_rows(value: np.ndarray, inputs: Tensor, labels: Tensor) -> None:
    """Fold each row's float32 ``inputs`` and float64 ``labels`` into its hash ``value``."""
    if inputs.shape[1] % 2:  # whole 64-bit words: pad one float32 column of zeros
        inputs = torch.nn.functional.pad(inputs, (0, 1))
    words = [
        np.ascontiguousarray(inputs.numpy()).view(np.uint64),
        np.ascontiguousarray(labels.numpy()).view(np.uint64),
    ]
    high = np.empty_like(value)  # one temporary, reused
    with np.errstate(over="ignore"):
        for block in words:
            for column in range(block.shape[1]):
                value ^= block[:, column]
                value *= MULTIPLIER
                value ^= np.right_shift(value, SHIFT, out=high)


def item_row_hashes(
    items: Sequence[Any], targets: Tensor, content: Callable[[Any], bytes]
) -> np.ndarray:
    """``(N,)`` uint64 from the SHA-256 of each item's bytes (``content``) and its target."""
    labels = targets.detach().cpu().double().numpy()
    hashes = np.empty(len(items), dtype=np.uint64)
    for row, item in enumerate(items):
        digest = hashlib.sha256(content(item))
        digest.update(labels[row].tobytes())
        hashes[row] = int.from_bytes(digest.digest()[:8], "little")
    return hashes


def of_hashes(hashes: np.ndarray) -> dict[str, Any]:
    """The fingerprint of rows whose hashes (in split order) are ``hashes``."""
    with np.errstate(over="ignore"):
        unordered = f"{int(hashes.sum(dtype=np.uint64)):016x}"
    ordered = hashlib.sha256(np.ascontiguousarray(hashes).data).hexdigest()  # no copy
    return {ROWS: len(hashes), ORDERED: ordered, UNORDERED: unordered}


def difference(stored: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """How ``actual`` differs from ``stored``: None, or a phrase naming count, order or content."""
    if stored.get(ORDERED) == actual.get(ORDERED) and stored.get(ROWS) == actual.get(ROWS):
        return None
    if stored.get(ROWS) != actual.get(ROWS):
        return f"{actual.get(ROWS)} rows where it had {stored.get(ROWS)}"
    if stored.get(UNORDERED) == actual.get(UNORDERED):
        return f"its {actual.get(ROWS)} rows in another order"
    return f"{actual.get(ROWS)} rows, but their content differs"


def is_fingerprint(value: Any) -> bool:
    """Whether a stored value has a fingerprint's shape (a checkpoint's text is data)."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get(ROWS), int)
        and isinstance(value.get(ORDERED), str)
        and len(value[ORDERED]) == 64
        and isinstance(value.get(UNORDERED), str)
        and len(value[UNORDERED]) == 16
    )
