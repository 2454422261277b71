"""Variable-length inputs (sequences) as numpy: read, check and pad them for the model.

A data module that declares a varying axis (``DataInfo.varying_axes``: a sequence's length)
trains on inputs padded along it with ``DataInfo.padding_value``; the net reads the padding
as the end of each sequence, so padding never changes an answer. Users give sequences as a
list per row (JSON), or as a padded array (``.npy``, each row's tail holding the padding
value) or a padded array plus ``lengths`` (``.npz``). Everything here turns those into one
padded float32 array, checked row by row. No torch: ONNX predict and serve import it.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np

from platekit._errors import UserError, first_line
from platekit.data._info import DataInfo

LENGTHS_KEY = "lengths"  # the .npz array holding each row's length


def shape_text(info: DataInfo) -> str:
    """``(N, L)`` with the varying axis named: ``(N, L<=40)``, ``(N, L, 3)``, ``(N, 8, 8)``."""
    sizes = [str(n) for n in info.input_shape]
    axis = info.varying_axis
    if axis is not None:
        limit = info.varying_axes[axis]
        sizes[axis] = "L" if limit is None else f"L<={limit}"
    return "(N, " + ", ".join(sizes) + ")"


def describe_rule(info: DataInfo) -> str:
    """What a valid sequence is, for messages and ``input_description``."""
    limit = info.varying_axes.get(info.varying_axis or 0)
    length = f"1 to {limit}" if limit is not None else "1 or more"
    tokens = f"integer ids 0..{info.vocab_size - 1}, " if info.vocab_size else ""
    return (
        f"{shape_text(info)}: {tokens}sequences of length {length}, padded with "
        f"{info.padding_value:g} after their end"
    )


def step_is_padding(array: np.ndarray, axis: int, padding: float) -> np.ndarray:
    """``(N, T)``: whether each step of each row (along ``axis`` of ``array``) is all padding."""
    moved = np.moveaxis(array, axis, 1)
    return np.asarray((moved.reshape(len(array), moved.shape[1], -1) == padding).all(axis=2))


def check_sequences(
    array: np.ndarray, lengths: np.ndarray | None, info: DataInfo, source: str
) -> np.ndarray:
    """A padded float32 array of checked sequences, cropped to its longest row.

    Args:
        array: ``(N, *input_shape)`` with any size along the varying axis.
        lengths: each row's length; ``None``: a row ends after its last step that is not
            all padding.
    """
    assert info.varying_axis is not None
    assert info.padding_value is not None
    axis, padding = info.varying_axis + 1, info.padding_value
    expected = shape_text(info)
    if array.size == 0:
        raise UserError(f"input '{source}' is empty; pass sequences of shape {expected}")
    if array.dtype.kind not in ("fiu" if info.vocab_size else "f"):
        raise UserError(f"input '{source}' has dtype {array.dtype}; expected numbers {expected}")
    fixed = [n for i, n in enumerate(array.shape[1:]) if i + 1 != axis]
    wanted = [n for i, n in enumerate(info.input_shape) if i + 1 != axis]
    if array.ndim != len(info.input_shape) + 1 or fixed != wanted:
        raise UserError(
            f"input '{source}' has shape {tuple(array.shape)}; expected {expected} "
            "(only the length L may vary)"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        array = array.astype(np.float32)  # a copy: the tails are overwritten below
    finite = np.isfinite(array.reshape(len(array), -1)).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise UserError(f"input '{source}' row {row} holds NaN, Inf or a value beyond float32")
    steps = array.shape[axis]
    is_padding = step_is_padding(array, axis, padding)
    if lengths is None:
        lengths = np.where(is_padding.all(1), 0, steps - np.argmin(is_padding[:, ::-1], axis=1))
    lengths = check_lengths(lengths, len(array), steps, source)
    limit = info.varying_axes[info.varying_axis]
    for row, length in enumerate(lengths.tolist()):
        if length < 1:
            raise UserError(f"input '{source}' row {row} is an empty sequence; give 1 step or more")
        if limit is not None and length > limit:
            raise UserError(
                f"input '{source}' row {row} has length {length}, over the model's maximum "
                f"{limit}; shorten it (e.g. keep its last {limit} steps)"
            )
        inside = np.flatnonzero(is_padding[row, :length])
        if len(inside):
            raise UserError(
                f"input '{source}' row {row} step {int(inside[0])} equals the padding value "
                f"{padding:g} inside its length {length}; the model reads padding as the "
                "end of a sequence: drop or replace that step"
            )
    beyond = np.arange(steps)[None, :] >= lengths[:, None]  # (N, T)
    np.moveaxis(array, axis, 1)[beyond] = padding
    array = np.take(array, np.arange(int(lengths.max())), axis=axis)
    if info.vocab_size:
        check_tokens(array, info.vocab_size, source)
    return array


def check_lengths(lengths: Any, rows: int, steps: int, source: str) -> np.ndarray:
    lengths = np.asarray(lengths)
    if lengths.shape != (rows,) or lengths.dtype.kind not in "iu":
        raise UserError(
            f"input '{source}': lengths has shape {lengths.shape} and dtype {lengths.dtype}; "
            f"give one integer length per row ({rows})"
        )
    if (lengths > steps).any():
        row = int(np.flatnonzero(lengths > steps)[0])
        raise UserError(
            f"input '{source}' row {row} has length {int(lengths[row])}, more than the "
            f"{steps} steps its array holds"
        )
    return lengths.astype(np.int64)


def check_tokens(array: np.ndarray, vocab_size: int, source: str) -> None:
    """Token ids: whole numbers in ``[0, vocab_size)``."""
    bad = (array != np.round(array)) | (array < 0) | (array >= vocab_size)
    if bad.any():
        row = int(np.flatnonzero(bad.reshape(len(array), -1).any(axis=1))[0])
        value = array[row][bad[row]][0]
        raise UserError(
            f"input '{source}' row {row} holds token {value:g}; token ids are whole numbers "
            f"0..{vocab_size - 1} (the padding value among them)"
        )


def pad_rows(rows: list[np.ndarray], info: DataInfo) -> tuple[np.ndarray, np.ndarray]:
    """Arrays ``(N_i, *shape)`` whose varying axis differs -> one padded array and the
    size each had along that axis (before any padding it already held)."""
    assert info.varying_axis is not None
    assert info.padding_value is not None
    axis = info.varying_axis + 1
    longest = max(row.shape[axis] for row in rows)
    padded = []
    for row in rows:
        width = [(0, 0)] * row.ndim
        width[axis] = (0, longest - row.shape[axis])
        padded.append(np.pad(row, width, constant_values=info.padding_value))
    sizes = np.concatenate([np.full(len(row), row.shape[axis]) for row in rows])
    return np.concatenate(padded), sizes


def concatenate(arrays: list[np.ndarray], info: DataInfo) -> np.ndarray:
    """Checked arrays of inputs, in order: padded to a common length if the model's varies."""
    if info.varying_axis is None:
        return np.concatenate(arrays)
    return pad_rows(arrays, info)[0]


def from_json(value: Any, info: DataInfo, source: str) -> np.ndarray:
    """A list of sequences (a list per row, any lengths), or one sequence, as a padded array."""
    if not isinstance(value, list) or not value:
        raise UserError(
            f"input '{source}' is not a non-empty list of sequences {shape_text(info)}; "
            "send a list per row, e.g. [[3, 1, 4], [1, 5]]"
        )
    if depth(value) == len(info.input_shape):
        value = [value]  # a single sequence
    rows = []
    for row, item in enumerate(value):
        try:
            array = np.asarray(item, dtype=np.float32)
        except (ValueError, TypeError, OverflowError) as error:
            raise UserError(
                f"input '{source}' row {row} is not a sequence of numbers {shape_text(info)} "
                f"({first_line(error)})"
            ) from None
        if array.ndim != len(info.input_shape) or array.size == 0:
            raise UserError(
                f"input '{source}' row {row} has shape {array.shape}; each row is one "
                f"sequence of shape {shape_text(info)[4:-1]}"
            )
        rows.append(array[None])
    padded, lengths = pad_rows(rows, info)
    return check_sequences(padded, lengths, info, source)


def depth(value: Any) -> int:
    """How deep lists nest, following first elements: ``[[1, 2]]`` -> 2."""
    level = 0
    while isinstance(value, list):
        level += 1
        value = value[0] if value else None
    return level


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(f"input '{path}' is not readable JSON ({first_line(error)})") from None


def split_npz(arrays: dict[str, object], npz_key: str | None, source: str) -> tuple[str, bool]:
    """The key of the inputs in a .npz, and whether it holds ``lengths`` beside them."""
    keys = list(arrays)
    has_lengths = LENGTHS_KEY in keys and npz_key != LENGTHS_KEY
    others = [key for key in keys if key != LENGTHS_KEY or not has_lengths]
    key = npz_key if npz_key is not None else (others[0] if len(others) == 1 else None)
    if key not in others:
        raise UserError(
            f"input '{source}' holds arrays {keys} and npz_key={npz_key}; save the padded "
            f"sequences and their lengths (np.savez(path, inputs=padded, lengths=lengths)) "
            "or set npz_key"
        )
    return key, has_lengths
