"""Read what users have for prediction: arrays, CSV rows, image files or folders of them.

Everything becomes raw float32 ``(N, *input_shape)`` on the scale the model was trained on,
with one name per row, read the way training read its data (``DataInfo`` says how).
"""

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from platekit._errors import UserError, first_line, inert
from platekit._files import format_bytes
from platekit.data._encoding import encode
from platekit.data._images import IMAGE_SUFFIXES, MAX_PIXELS, load_image, source_name
from platekit.data._info import DataInfo
from platekit.data._memory import shortfall
from platekit.data._padding import (
    LENGTHS_KEY,
    check_sequences,
    concatenate,
    from_json,
    read_json_file,
    split_npz,
)
from platekit.data._tables import column_index, numeric_column, read_table

log = logging.getLogger(__name__)

ARRAY_SUFFIXES = (".npy", ".npz")
JSON_SUFFIXES = (".json",)  # a list per row: sequences of any allowed length
TABLE_SUFFIXES = (".csv",)
POLARITY_GAP = 0.35  # background brighter/darker than training's by this much: warn


def read_inputs(
    paths: Sequence[str | Path],
    info: DataInfo,
    *,
    npz_key: str | None = None,
    invert: bool = False,
    max_pixels: int | None = MAX_PIXELS,
) -> tuple[np.ndarray, list[str]]:
    """All rows of all inputs, in order, and a name per row (``file[i]`` or the image file).

    Args:
        paths: .npy/.npz arrays of ``(N, *input_shape)`` (sequences: padded, the .npz
            with ``lengths``), .json lists of rows, .csv tables with the training
            columns, image files, or folders (searched recursively for all of these).
        info: what the model takes (shape, feature names, image background).
        npz_key: the array to read from a .npz holding several.
        invert: flip images' polarity (dark on light to light on dark, or back).
        max_pixels: an image with more pixels is refused from its header.
    """
    if not paths:
        raise UserError("no inputs given; pass inputs=file.npy, a folder, or inputs=[a.png,b.png]")
    known = ARRAY_SUFFIXES + TABLE_SUFFIXES + IMAGE_SUFFIXES + JSON_SUFFIXES
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():  # its own files, as training reads a class folder
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in known)
            below = [
                folder
                for folder in sorted(path.rglob("*"))
                if folder.is_dir() and any(p.suffix.lower() in known for p in folder.iterdir())
            ]
            if below:
                shown = ", ".join(inert(str(folder)) for folder in below[:3])
                log.warning(
                    "folder '%s': its subfolders %s%s are not read (a folder's inputs are its "
                    "own files, as training reads a class folder); name them too, e.g. "
                    "inputs=[%s,%s]",
                    inert(str(path)),
                    shown,
                    " ..." if len(below) > 3 else "",
                    inert(str(path)),
                    inert(str(below[0])),
                )
            if not found:
                raise UserError(
                    f"folder '{path}' holds no {', '.join(known)} files of its own"
                    + (
                        f" (its subfolders do: name them, e.g. inputs=[{below[0]}])"
                        if below
                        else ""
                    )
                )
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UserError(
                f"input '{path}' is not an existing file or folder; pass .npy/.npz/.csv or "
                "image files or folders, several as a list: inputs=[a.png,b.png]"
            )
    arrays, names, images = [], [], []
    for path in files:
        suffix = path.suffix.lower()
        if suffix in ARRAY_SUFFIXES and info.varying_axes:
            array = read_sequences(path, npz_key, info)
            names += [f"{path}[{row}]" for row in range(len(array))]
        elif suffix in ARRAY_SUFFIXES:
            array = check_array(
                read_array(path, npz_key, info.input_shape), info.input_shape, str(path)
            )
            names += [f"{path}[{row}]" for row in range(len(array))]
        elif suffix in JSON_SUFFIXES:
            array = json_rows(read_json_file(path), info, str(path))
            names += [f"{path}[{row}]" for row in range(len(array))]
        elif suffix in TABLE_SUFFIXES:
            array = read_rows(path, info)
            names += [f"{path}[{row}]" for row in range(len(array))]
        elif suffix in IMAGE_SUFFIXES:
            array = read_image(path, info, invert=invert, max_pixels=max_pixels)[None]
            names.append(str(path))
            images.append(array[0])
        else:
            raise UserError(
                f"input '{path}' has suffix '{path.suffix}'; use one of {', '.join(known)}"
            )
        arrays.append(array)
    if not sum(len(a) for a in arrays):
        raise UserError(f"inputs {[str(p) for p in paths]} hold no rows; pass some data")
    if images:
        warn_if_inverted(images, info, invert)
    return concatenate(arrays, info).astype(np.float32, copy=False), names


def read_array(
    path: Path, npz_key: str | None, input_shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """The array in a .npy, or one array of a .npz (the only one, or ``npz_key``).

    Its header is read first (in a .npz, the member's, through the zip stream): a shape
    other than ``(N, *input_shape)``, more data than the file or member holds, or more memory
    than this process may use is refused before any of it is read or decompressed.
    """
    if path.suffix.lower() == ".npy":
        with opened(path) as handle:
            check_header(handle, path.stat().st_size, str(path), input_shape)
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, MemoryError) as error:
        raise UserError(
            f"input '{path}' is not a readable numpy file ({first_line(error)})"
        ) from None
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded:
        keys = list(loaded.files)
        if not keys:
            raise UserError(
                f"input '{path}' is an .npz holding no arrays; save the inputs in it, "
                "e.g. np.savez(path, x=array)"
            )
        key = keys[0] if npz_key is None and len(keys) == 1 else npz_key
        if key in keys:
            member = loaded.zip.getinfo(f"{key}.npy")
            with loaded.zip.open(member) as handle:
                check_header(handle, member.file_size, f"{path}[{key}]", input_shape)
            try:
                return loaded[key]
            except (ValueError, OSError, EOFError, MemoryError) as error:
                raise UserError(
                    f"input '{path}' array '{key}' cannot be read safely ({first_line(error)}); "
                    "save plain float arrays (np.savez(path, x=array.astype('float32')))"
                ) from None
    raise UserError(
        f"input '{path}' holds arrays {keys} and npz_key={npz_key}; set npz_key to one of them"
    )


@contextmanager
def opened(path: Path) -> Iterator[BinaryIO]:
    try:
        with path.open("rb") as handle:
            yield handle
    except OSError as error:
        raise UserError(f"input '{path}' cannot be read ({first_line(error)})") from None


def check_header(
    handle: BinaryIO, size: int, source: str, input_shape: tuple[int, ...] | None
) -> None:
    """Refuse a numpy array whose header (read from ``handle``, ``size`` bytes in all) claims
    an object array, more bytes than it holds, another shape than ``(N, *input_shape)`` or
    more memory than this process may allocate; nothing past the header is read."""
    try:
        version = np.lib.format.read_magic(handle)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(handle)
        start = handle.tell()
    except (ValueError, OSError, EOFError, SyntaxError) as error:
        raise UserError(
            f"input '{source}' is not a readable numpy file ({first_line(error)})"
        ) from None
    claimed = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    held = size - start
    if dtype.hasobject or claimed > held:
        what = "an object array" if dtype.hasobject else f"{claimed:,} bytes but holds {held:,}"
        raise UserError(
            f"input '{source}' is not a plain numpy array file (its header claims {what}); "
            "save the inputs with np.save(path, array.astype('float32'))"
        )
    empty = 0 in shape  # said as empty after the read, with the shape it has
    if input_shape is not None and not empty and tuple(shape[1:]) != tuple(input_shape):
        expected = "(N, " + ", ".join(map(str, input_shape)) + ")"
        raise UserError(
            f"input '{source}' has shape {tuple(shape)}; expected {expected} "
            "(reshape it, e.g. array.reshape(-1, " + ", ".join(map(str, input_shape)) + "))"
        )
    # the array, its float32 copy and the checks' temporaries of that size
    need = claimed + 2 * int(np.prod(shape, dtype=np.float64)) * 4
    short = shortfall(need)
    if short is not None:
        raise UserError(
            f"input '{source}' holds {tuple(shape)} values: reading it takes about "
            f"{format_bytes(need)}, but {short}; pass it in parts"
        )


def check_array(array: np.ndarray, input_shape: tuple[int, ...], source: str) -> np.ndarray:
    """Raise a UserError naming the expected shape unless ``array`` is finite floats of it.

    Finiteness is checked after the cast to float32, the dtype the model takes: 1e300 in a
    float64 file becomes inf there.
    """
    expected = "(N, " + ", ".join(map(str, input_shape)) + ")"
    if array.size == 0:
        raise UserError(
            f"input '{source}' is empty (shape {tuple(array.shape)}); pass an array of shape "
            f"{expected} with N >= 1"
        )
    if array.dtype.kind != "f":
        raise UserError(
            f"input '{source}' has dtype {array.dtype}; expected floats of shape {expected} "
            "on the scale of the data module's raw inputs (export.json: input_description)"
        )
    if array.ndim != len(input_shape) + 1 or tuple(array.shape[1:]) != tuple(input_shape):
        raise UserError(
            f"input '{source}' has shape {tuple(array.shape)}; expected {expected} "
            "(reshape it, e.g. array.reshape(-1, " + ", ".join(map(str, input_shape)) + "))"
        )
    with np.errstate(over="ignore"):
        array = array.astype(np.float32, copy=False)
    finite = np.isfinite(array.reshape(len(array), -1)).all(axis=1)
    if not finite.all():
        first = int(np.flatnonzero(~finite)[0])
        raise UserError(
            f"input '{source}' row {first} holds NaN, Inf or a value beyond float32's range "
            "(about 3.4e38); clean or drop it"
        )
    return array


def read_rows(path: Path, info: DataInfo) -> np.ndarray:
    """A CSV's feature columns (by the names the model was trained on); other columns ignored."""
    return table_array(*read_table(path, what="input"), info, path)


def table_array(
    header: list[str], rows: list[list[str]], info: DataInfo, path: Path | str
) -> np.ndarray:
    """The feature columns of a parsed table (``read_table``/``parse_table``) as inputs."""
    if not info.feature_names:
        raise UserError(
            f"input '{path}' is a table, but the model was not trained on one; pass "
            f"{'images' if len(info.input_shape) == 3 else '.npy arrays'} instead"
        )
    if info.table_columns:  # raw columns with texts and gaps, encoded as in training
        return encoded_rows(header, rows, info, path)
    missing = [name for name in info.feature_names if name not in header]
    if missing:
        raise UserError(
            f"input '{path}' lacks the column(s) {', '.join(missing)} the model was trained "
            f"on; it needs {', '.join(info.feature_names)}"
        )
    index = column_index(path, header, info.feature_names)
    columns = [
        numeric_column(path, name, [row[index[name]] for row in rows])
        for name in info.feature_names
    ]
    return np.stack(columns, axis=1).reshape(len(rows), *info.input_shape)


def read_image(
    path: Path | BinaryIO, info: DataInfo, *, invert: bool, max_pixels: int | None = MAX_PIXELS
) -> np.ndarray:
    """One image (a file, or an open binary file) as ``input_shape`` floats in [0, 1],
    converted as training converted them."""
    if len(info.input_shape) != 3:
        raise UserError(
            f"input '{source_name(path)}' is an image, but the model takes inputs of shape "
            f"{info.input_shape}; pass .npy or .csv rows"
        )
    channels, height, width = info.input_shape
    pixels = load_image(path, channels, (height, width), max_pixels)
    return 1.0 - pixels if invert else pixels


def warn_if_inverted(images: list[np.ndarray], info: DataInfo, invert: bool) -> None:
    """Warn when images' background is the opposite of the training data's (light vs dark)."""
    if info.background is None:
        return
    flipped = []
    for image in images:
        border = np.concatenate(
            [image[:, 0], image[:, -1], image[:, :, 0], image[:, :, -1]], axis=None
        )
        if abs(float(border.mean()) - info.background) > POLARITY_GAP:
            flipped.append(image)
    if flipped:
        shade = "dark" if info.background < 0.5 else "light"
        fix = "drop invert=true" if invert else "pass invert=true"
        log.warning(
            "%d of %d images have a background unlike the training data's (%s, mean %.2f): "
            "predictions on inverted images are unreliable; %s if they are dark-on-light "
            "versions of the training images",
            len(flipped),
            len(images),
            shade,
            info.background,
            fix,
        )


def json_rows(value: object, info: DataInfo, source: str) -> np.ndarray:
    """Inputs given as JSON (a .json file, a serve body): a list of sequences, nested lists
    of ``(N, *input_shape)``, or for a table model ``{column: value}`` rows (one alone is a
    batch of one); any of them may come as ``{"inputs": ...}``."""
    if isinstance(value, dict) and set(value) == {"inputs"}:
        value = value["inputs"]
    if info.table_columns and isinstance(value, dict):
        value = [value]  # one row
    if info.table_columns and isinstance(value, list) and value and isinstance(value[0], dict):
        return record_rows(value, info, source)  # {"age": null, "city": "Lyon", ...}
    if isinstance(value, dict):
        raise UserError(
            f"input '{source}' is an object with keys {sorted(value)}; send an array, "
            'or {"inputs": array}'
        )
    if info.varying_axes:
        return from_json(value, info, source)
    try:
        array = np.asarray(value, dtype=np.float32)
    except (ValueError, TypeError, OverflowError) as error:
        raise UserError(
            f"input '{source}' is not an array of numbers of shape (N, "
            f"{', '.join(map(str, info.input_shape))}) ({first_line(error)})"
        ) from None
    if array.ndim == len(info.input_shape):
        array = array[None]  # a single input
    return check_array(array, info.input_shape, source)


def read_sequences(path: Path, npz_key: str | None, info: DataInfo) -> np.ndarray:
    """Padded sequences from a .npy, or a .npz holding them and (optionally) ``lengths``."""
    if path.suffix.lower() == ".npy":
        return check_sequences(read_array(path, npz_key), None, info, str(path))
    try:
        with np.load(path, allow_pickle=False) as loaded:
            key, has_lengths = split_npz(dict.fromkeys(loaded.files), npz_key, str(path))
            inputs = loaded[key]
            lengths = loaded[LENGTHS_KEY] if has_lengths else None
    except (ValueError, OSError, EOFError, MemoryError) as error:
        raise UserError(
            f"input '{path}' cannot be read safely as numpy arrays ({first_line(error)}); save "
            "plain arrays: np.savez(path, inputs=padded, lengths=lengths)"
        ) from None
    return check_sequences(inputs, lengths, info, str(path))


def encoded_rows(
    header: list[str], rows: list[list[str]], info: DataInfo, source: Path | str
) -> np.ndarray:
    """The model's inputs for parsed CSV rows holding the training columns (others ignored)."""
    names = [column["name"] for column in info.table_columns]
    missing = [name for name in names if name not in header]
    if missing:
        raise UserError(
            f"input '{source}' lacks the column(s) {', '.join(missing)} the model was trained "
            f"on; it needs {', '.join(names)} (a cell may be empty: a gap)"
        )
    index = column_index(source, header, names)
    cells = {name: [row[index[name]] for row in rows] for name in names}
    return encode(info.table_columns, cells, source).reshape(len(rows), *info.input_shape)


def record_rows(records: list[Any], info: DataInfo, source: str) -> np.ndarray:
    """The model's inputs for rows given as ``{column: value}`` objects (a JSON body):
    ``None``, ``""``, NaN and a key left out are gaps; texts and numbers are read as in a
    CSV cell."""
    if not all(isinstance(record, Mapping) for record in records):
        raise UserError(f"{source}: mix of objects and other values; send one object per row")
    header = sorted({str(key) for record in records for key in record})  # a key left out

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        return str(value)

    rows = [[cell(record.get(name)) for name in header] for record in records]  # ... is a gap
    return encoded_rows(header, rows, info, source)
