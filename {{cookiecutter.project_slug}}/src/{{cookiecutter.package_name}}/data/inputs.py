"""Read user inputs for prediction: array files (.npy, .npz) or image files.

Everything becomes raw float32 of shape ``(N, *input_shape)`` (for digits ``(N, 1, 8, 8)``
in [0, 1]), checked against the shape the model expects, with one name per row.
"""

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..cli.errors import UserError

ARRAY_SUFFIXES = (".npy", ".npz")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def read_inputs(
    paths: Sequence[str | Path],
    input_shape: tuple[int, ...],
    *,
    npz_key: str | None = None,
    invert: bool = False,
) -> tuple[np.ndarray, list[str]]:
    """All rows of all files, in order, and a name per row (``file[i]`` or the image file).

    Args:
        paths: .npy/.npz files holding ``(N, *input_shape)`` floats, or image files.
        input_shape: the shape of one input, e.g. ``(1, 8, 8)``.
        npz_key: the array to read from a .npz holding several.
        invert: images show a dark digit on a light background (training data is light
            on dark), so flip them.
    """
    if not paths:
        raise UserError("no inputs given; pass inputs=file.npy or inputs=[a.png,b.png]")
    arrays, names = [], []
    for path in map(Path, paths):
        if not path.is_file():
            raise UserError(
                f"input '{path}' is not an existing file; pass .npy/.npz or image files, "
                "several as a list: inputs=[a.png,b.png]"
            )
        suffix = path.suffix.lower()
        if suffix in ARRAY_SUFFIXES:
            array = check_array(read_array(path, npz_key), input_shape, str(path))
            names += [f"{path}[{row}]" for row in range(len(array))]
        elif suffix in IMAGE_SUFFIXES:
            array = read_image(path, input_shape, invert=invert)[None]
            names.append(str(path))
        else:
            raise UserError(
                f"input '{path}' has suffix '{path.suffix}'; use one of "
                f"{', '.join(ARRAY_SUFFIXES + IMAGE_SUFFIXES)}"
            )
        arrays.append(array)
    if not sum(len(a) for a in arrays):
        raise UserError(f"inputs {[str(p) for p in paths]} hold no rows; pass some data")
    return np.concatenate(arrays).astype(np.float32, copy=False), names


def read_array(path: Path, npz_key: str | None) -> np.ndarray:
    """The array in a .npy, or one array of a .npz (the only one, or ``npz_key``)."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise UserError(f"input '{path}' is not a readable numpy file ({error})") from error
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded:
        keys = list(loaded.files)
        if not keys:
            raise UserError(
                f"input '{path}' is an .npz holding no arrays; save the inputs in it, "
                "e.g. np.savez(path, x=array)"
            )
        if npz_key is None and len(keys) == 1:
            return loaded[keys[0]]
        if npz_key in keys:
            return loaded[npz_key]
    raise UserError(
        f"input '{path}' holds arrays {keys} and npz_key={npz_key}; set npz_key to one of them"
    )


def check_array(array: np.ndarray, input_shape: tuple[int, ...], source: str) -> np.ndarray:
    """Raise a UserError naming the expected shape unless ``array`` is finite floats of it."""
    expected = "(N, " + ", ".join(map(str, input_shape)) + ")"
    if array.size == 0:
        raise UserError(
            f"input '{source}' is empty (shape {tuple(array.shape)}); pass an array of shape "
            f"{expected} with N >= 1"
        )
    if array.dtype.kind != "f":
        raise UserError(
            f"input '{source}' has dtype {array.dtype}; expected floats of shape {expected} "
            "on the scale of the data module's load_raw() (digits: pixels / 16, in [0, 1])"
        )
    if array.ndim != len(input_shape) + 1 or tuple(array.shape[1:]) != tuple(input_shape):
        raise UserError(
            f"input '{source}' has shape {tuple(array.shape)}; expected {expected} "
            "(reshape it, e.g. array.reshape(-1, " + ", ".join(map(str, input_shape)) + "))"
        )
    finite = np.isfinite(array.reshape(len(array), -1)).all(axis=1)
    if not finite.all():
        first = int(np.flatnonzero(~finite)[0])
        raise UserError(f"input '{source}' row {first} holds NaN or Inf; clean or drop it")
    return array


def read_image(path: Path, input_shape: tuple[int, ...], *, invert: bool) -> np.ndarray:
    """One image as ``input_shape`` floats in [0, 1]: grey (1 channel) or RGB (3)."""
    channels, height, width = input_shape
    if channels not in (1, 3):
        raise UserError(f"images cannot feed a model taking {channels} channels; pass arrays")
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB")
            if image.size != (width, height):
                # Box filter: each pixel is the mean of the area it covers, like a downscan.
                image = image.resize((width, height), Image.Resampling.BOX)
            pixels = np.asarray(image, dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as error:
        raise UserError(f"input '{path}' is not a readable image ({error})") from error
    pixels = pixels.reshape(height, width, channels).transpose(2, 0, 1)  # (C, H, W)
    return 1.0 - pixels if invert else pixels
