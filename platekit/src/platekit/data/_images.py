"""Decode an image file into the float tensor a model takes, the same way everywhere.

Training (the image-folder data module) and prediction read images through
:func:`load_image`, so a picture is converted identically in both: 8- and 16-bit, palette,
grey or colour, with or without alpha.
"""

import re
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from platekit._errors import UserError, first_line

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
MAX_PIXELS = 16_777_216  # 4096 x 4096: predict's and the server's default max_image_pixels
OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")
STRIP_ROWS = 256  # rows of a picture converted to floats at a time


class ImageTooLargeError(UserError):
    """An image with more pixels than allowed: refused from its header, before decoding."""


def load_image(
    path: Path | BinaryIO,
    channels: int,
    size: tuple[int, int],
    max_pixels: int | None = MAX_PIXELS,
) -> np.ndarray:
    """``(channels, height, width)`` float32 in [0, 1]: grey (1) or RGB (3), resized.

    ``path`` is a file or an open binary file (a model server's request body). The picture
    is turned upright by its EXIF orientation (a phone's JPEG). 16-bit images keep their
    full range (scaled by 65535, not clipped at 255); palette images are expanded;
    transparent pixels count as background (alpha over black). An image over
    ``max_pixels`` is refused from its header (a small file can hold a huge picture), and
    one with NaN or infinite pixels (a float TIFF) is refused.
    """
    if channels not in (1, 3):
        raise UserError(f"images have 1 (grey) or 3 (RGB) channels, not {channels}")
    name = source_name(path)
    try:
        with Image.open(path) as image:
            check_pixels(image.width * image.height, max_pixels, name)
            ImageOps.exif_transpose(image, in_place=True)  # no copy of a large picture
            pixels = to_float(image, channels)
    except Image.DecompressionBombError as error:
        raise ImageTooLargeError(
            f"'{name}' is too large to decode ({first_line(error)}); pass a smaller image"
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as error:
        reason = " ".join(OBJECT_REPR.sub("", first_line(error)).split())  # no object reprs
        raise UserError(f"'{name}' is not a readable image ({reason})") from None
    if not np.isfinite(pixels).all():
        raise UserError(f"'{name}' holds NaN or infinite pixel values; pass a clean image")
    height, width = size
    if pixels.shape[:2] != (height, width):
        pixels = resize(pixels, (height, width))
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def check_pixels(pixels: int, limit: int | None, name: str) -> None:
    if limit is not None and pixels > limit:
        raise ImageTooLargeError(
            f"'{name}' has {pixels} pixels, over the limit of {limit} (max_image_pixels); "
            "pass a smaller image, or raise max_image_pixels"
        )


def source_name(source: Path | BinaryIO) -> str:
    """How messages name an image: its path, or an open file's ``name`` if it has one."""
    return str(source) if isinstance(source, str | Path) else str(getattr(source, "name", "image"))


def to_float(image: Image.Image, channels: int) -> np.ndarray:
    """``(H, W, channels)`` float32 in [0, 1], alpha applied over black, grey or RGB.

    Converted ``STRIP_ROWS`` rows at a time: a large picture's float copies never exist
    whole, only the result does (each pixel's value is what a whole-picture conversion gives).
    """
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        scale = 65535.0 if image.mode.startswith("I;16") or np.asarray(image).max() > 255 else 255.0
        values = np.clip(np.asarray(image, dtype=np.float32) / scale, 0.0, 1.0)[..., None]
        return with_channels(values, channels)
    if image.mode == "F":
        return with_channels(
            np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)[..., None], channels
        )
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    result = np.empty((image.height, image.width, channels), dtype=np.float32)
    for top in range(0, image.height, STRIP_ROWS):
        strip = image.crop((0, top, image.width, min(top + STRIP_ROWS, image.height)))
        values = np.asarray(strip, dtype=np.float32) / 255.0
        if values.ndim == 2:
            values = values[..., None]
        if image.mode in ("LA", "RGBA"):
            values = values[..., :-1] * values[..., -1:]
        result[top : top + STRIP_ROWS] = with_channels(values, channels)
    return result


def with_channels(pixels: np.ndarray, channels: int) -> np.ndarray:
    """``(H, W, 1 or 3)`` as ``(H, W, channels)``: the luminance, or grey repeated as RGB."""
    if pixels.shape[2] == channels:
        return pixels
    return grey(pixels) if channels == 1 else np.repeat(grey(pixels), 3, axis=2)


def grey(pixels: np.ndarray) -> np.ndarray:
    """Luminance of ``(H, W, 3)`` RGB (ITU-R 601, as Pillow's ``L``), or grey as is."""
    if pixels.shape[2] == 1:
        return pixels
    weights = np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return (pixels @ weights)[..., None]


def resize(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize float ``(H, W, C)``: box filter when shrinking (area mean), bilinear otherwise."""
    height, width = size
    shrink = pixels.shape[0] >= height and pixels.shape[1] >= width
    method = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
    planes = [  # a contiguous plane is shared with Pillow, not copied once more
        np.asarray(
            Image.fromarray(np.ascontiguousarray(pixels[..., c])).resize((width, height), method)
        )
        for c in range(pixels.shape[2])
    ]
    return np.stack(planes, axis=2).astype(np.float32)


def image_files(root: Path, recursive: bool = True) -> list[Path]:
    """Image files under ``root`` (or only directly in it), sorted, hidden files skipped."""
    found = root.rglob("*") if recursive else root.iterdir()
    return sorted(
        path
        for path in found
        if path.suffix.lower() in IMAGE_SUFFIXES
        and path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )


def nested_image_folders(root: Path) -> list[tuple[Path, int]]:
    """Folders below ``root`` (not ``root`` itself) holding image files, with their counts."""
    folders = sorted(
        path
        for path in root.rglob("*")
        if path.is_dir() and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )
    counts = [(folder, len(image_files(folder, recursive=False))) for folder in folders]
    return [(folder, count) for folder, count in counts if count]
