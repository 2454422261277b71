"""A fixed-size fingerprint of the rows of a split, so a checkpoint knows its data.

Per split: the row count, a SHA-256 of the rows' content in split order (raw inputs as the
data module gives them, then targets), and an order-free sum of one 64-bit hash per row, so
a changed split is named as "count", "order" (the same rows, another order) or "content".
About 200 bytes per split. A table's rows are hashed as the encoded float32 tensor (so gap
fills or categories learnt anew show as content); files (an image folder's) by their bytes,
read without decoding.
"""

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from torch import Tensor

ROWS, ORDERED, UNORDERED = "rows", "sha256", "set"
_MASK = (1 << 64) - 1


def of_tensor(inputs: Tensor, targets: Tensor) -> dict[str, Any]:
    """The fingerprint of rows given as one tensor ``(N, ...)`` and their targets ``(N,)``."""
    flat = np.ascontiguousarray(inputs.detach().cpu().reshape(len(inputs), -1).float().numpy())
    labels = np.ascontiguousarray(targets.detach().cpu().reshape(len(targets), -1).double().numpy())
    ordered = hashlib.sha256()
    ordered.update(flat.tobytes())
    ordered.update(labels.tobytes())
    words = np.concatenate([flat.view(np.uint32), labels.view(np.uint32)], axis=1)
    return _fingerprint(len(inputs), ordered.hexdigest(), _row_hashes(words))


def of_items(
    items: Sequence[Any], targets: Tensor, content: Callable[[Any], bytes]
) -> dict[str, Any]:
    """The fingerprint of rows given as items (e.g. file paths) whose bytes ``content`` reads."""
    ordered = hashlib.sha256()
    hashes = np.empty(len(items), dtype=np.uint64)
    labels = targets.detach().cpu().double().numpy()
    for row, item in enumerate(items):
        digest = hashlib.sha256(content(item))
        digest.update(labels[row].tobytes())
        value = digest.digest()
        ordered.update(value)
        hashes[row] = int.from_bytes(value[:8], "little")
    return _fingerprint(len(items), ordered.hexdigest(), hashes)


def _row_hashes(words: np.ndarray) -> np.ndarray:
    """One 64-bit hash per row of 32-bit ``words`` (N, W): a keyed sum, mixed (splitmix64)."""
    keys = np.random.default_rng(0x5EED).integers(1, 2**63, size=words.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        hashes = (words.astype(np.uint64) * (keys | np.uint64(1))).sum(axis=1, dtype=np.uint64)
        hashes ^= hashes >> np.uint64(31)
        hashes *= np.uint64(0xBF58476D1CE4E5B9)
        hashes ^= hashes >> np.uint64(29)
    return hashes


def _fingerprint(rows: int, ordered: str, hashes: np.ndarray) -> dict[str, Any]:
    with np.errstate(over="ignore"):
        total = int(hashes.sum(dtype=np.uint64)) & _MASK
    return {ROWS: rows, ORDERED: ordered, UNORDERED: f"{total:016x}"}


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
