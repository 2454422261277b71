"""Decode an image file into the float tensor a model takes, the same way everywhere.

Training (the image-folder data module) and prediction read images through
:func:`load_image`, so a picture is converted identically in both: 8- and 16-bit, palette,
grey or colour, with or without alpha.
"""

from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..cli.errors import UserError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def load_image(path: Path | BinaryIO, channels: int, size: tuple[int, int]) -> np.ndarray:
    """``(channels, height, width)`` float32 in [0, 1]: grey (1) or RGB (3), resized.

    ``path`` is a file or an open binary file (a model server's request body). 16-bit
    images keep their full range (scaled by 65535, not clipped at 255); palette images are
    expanded; transparent pixels count as background (alpha over black).
    """
    if channels not in (1, 3):
        raise UserError(f"images have 1 (grey) or 3 (RGB) channels, not {channels}")
    try:
        with Image.open(path) as image:
            pixels = to_float(image)
    except (UnidentifiedImageError, OSError, ValueError) as error:
        raise UserError(f"'{source_name(path)}' is not a readable image ({error})") from error
    if pixels.shape[2] != channels:
        pixels = grey(pixels) if channels == 1 else np.repeat(grey(pixels), 3, axis=2)
    height, width = size
    if pixels.shape[:2] != (height, width):
        pixels = resize(pixels, (height, width))
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def source_name(source: Path | BinaryIO) -> str:
    """How messages name an image: its path, or an open file's ``name`` if it has one."""
    return str(source) if isinstance(source, str | Path) else str(getattr(source, "name", "image"))


def to_float(image: Image.Image) -> np.ndarray:
    """``(H, W, 1 or 3)`` float32 in [0, 1], alpha applied over black."""
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        scale = 65535.0 if image.mode.startswith("I;16") or np.asarray(image).max() > 255 else 255.0
        values = np.asarray(image, dtype=np.float32) / scale
        return np.clip(values, 0.0, 1.0)[..., None]
    if image.mode == "F":
        return np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)[..., None]
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    values = np.asarray(image, dtype=np.float32) / 255.0
    if values.ndim == 2:
        values = values[..., None]
    if image.mode in ("LA", "RGBA"):
        values = values[..., :-1] * values[..., -1:]
    return values


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
    planes = [
        np.asarray(Image.fromarray(pixels[..., c]).resize((width, height), method))
        for c in range(pixels.shape[2])
    ]
    return np.stack(planes, axis=2).astype(np.float32)


def image_files(root: Path) -> list[Path]:
    """Image files under ``root`` (recursive), sorted, hidden files skipped."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.suffix.lower() in IMAGE_SUFFIXES
        and path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )
