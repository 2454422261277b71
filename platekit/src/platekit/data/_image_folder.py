"""A folder of images, one subfolder per class, with no code.

``data=image_folder data.root=/abs/folder``: ``folder/cat/*.png``, ``folder/dog/*.jpg``, ...
Class names are the subfolder names (sorted). Images are decoded, resized to
``data.image_size`` and augmented in DataLoader workers, each sample's randomness drawn from
``(seed, epoch, index)`` so a resumed run sees the very same augmented tensors.
"""

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.nn import functional

from platekit._errors import UserError, inert
from platekit.data._base import BaseDataModule, Rows
from platekit.data._images import image_files, load_image, nested_image_folders
from platekit.data._info import DataInfo

log = logging.getLogger(__name__)


class ImageFolderDataModule(BaseDataModule):
    """Images under ``root/<class>/``, as ``(channels, image_size, image_size)`` in [0, 1].

    Args:
        root: the folder holding one subfolder per class.
        image_size: height and width every image is resized to.
        channels: 1 (grey) or 3 (RGB); images are converted to it.
        crop_padding: train-time random crop: pad by this many pixels (zeros), crop back.
            0: off.
        flip: train-time random horizontal flip (off for digits and text).
        num_workers: decoding processes (each image is decoded every epoch).
        cache_decoded: decode every image once, at setup, into one float32 tensor in memory
            (``N x channels x image_size^2 x 4`` bytes); batches are then sliced from it
            (augmentation still runs per sample, from the same seeds). Same batches as
            without it; for data that fits in memory and a run the decoding holds back.
        **kwargs: :class:`BaseDataModule`'s arguments (batch sizes, split, seed, ...).
    """

    input_name = "images"

    def __init__(
        self,
        root: str | None = None,
        image_size: int = 32,
        channels: int = 3,
        crop_padding: int = 0,
        flip: bool = False,
        normalize: str = "channel",
        num_workers: int = 2,
        cache_decoded: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(normalize=normalize, num_workers=num_workers, **kwargs)

    def read(self) -> Rows:
        """One row per image file directly inside a class folder (classes sorted by name):
        paths decoded per batch, or every image decoded now with ``cache_decoded``."""
        options = self.hparams
        if options.channels not in (1, 3) or options.image_size < 1 or options.crop_padding < 0:
            raise UserError(
                f"data.channels={options.channels} must be 1 or 3, data.image_size="
                f"{options.image_size} >= 1 and data.crop_padding={options.crop_padding} >= 0"
            )
        root = Path(options.root or "")
        if not options.root or not root.is_dir():
            raise UserError(
                f"data.root '{root}' is not a folder; pass a folder with one subfolder of "
                "images per class, e.g. data.root=/abs/images"
            )
        self.hparams.root = str(root.resolve())
        classes = sorted(
            p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
        paths: list[str] = []
        labels: list[int] = []
        nested: list[str] = []
        for label, name in enumerate(classes):
            files = image_files(root / name, recursive=False)
            paths += [str(path) for path in files]
            labels += [label] * len(files)
            nested += [
                f"{name}/{folder.relative_to(root / name)}/ ({count})"
                for folder, count in nested_image_folders(root / name)
            ]
        if nested:
            raise UserError(
                f"data.root '{root}': a class's images are the files directly in its folder, "
                f"but {len(nested)} folder(s) inside class folders hold images: "
                f"{', '.join(inert(n) for n in nested[:5])}{' ...' if len(nested) > 5 else ''}; "
                "move them up into their class folder, or make each a class folder of its own"
            )
        log.info(
            "image folder %s: %d images in %d class folders (a class's images are the files "
            "directly in its folder)",
            root,
            len(paths),
            len(classes),
        )
        if len(classes) < 2 or not paths:
            raise UserError(
                f"data.root '{root}' holds {len(classes)} class folders and {len(paths)} "
                "images; it needs 2 or more subfolders (one per class) of image files"
            )
        targets = torch.tensor(labels, dtype=torch.int64)
        if options.cache_decoded:
            decoded = torch.stack([self.decode(path) for path in paths])  # (N, C, H, W)
            return Rows(decoded, targets, class_names=classes)
        return Rows(paths, targets, class_names=classes)

    def decode(self, item: str) -> Tensor:
        size = int(self.hparams.image_size)
        return torch.from_numpy(load_image(Path(item), int(self.hparams.channels), (size, size)))

    @property
    def augments(self) -> bool:
        return bool(self.hparams.crop_padding or self.hparams.flip)

    def augment(self, sample: Tensor, generator: torch.Generator) -> Tensor:
        pad = int(self.hparams.crop_padding)
        if pad:
            height, width = sample.shape[-2:]
            padded = functional.pad(sample, (pad, pad, pad, pad))
            top, left = torch.randint(0, 2 * pad + 1, (2,), generator=generator).tolist()
            sample = padded[:, top : top + height, left : left + width]
        if self.hparams.flip and torch.rand((), generator=generator) < 0.5:
            sample = sample.flip(-1)
        return sample

    def describe_input(self, info: DataInfo) -> str:
        channels, height, width = info.input_shape
        colour = "grey" if channels == 1 else "RGB"
        return (
            f"float32 (N, {channels}, {height}, {width}): {colour} images scaled to [0, 1] "
            "(8-bit values / 255, 16-bit / 65535), resized to "
            f"{height}x{width}; normalisation is inside the model; N is free"
        )

    @classmethod
    def make_fixture(cls, directory: Path) -> dict[str, object]:
        """Three classes of small grey PNGs (bright shapes on dark) for the contract tests.

        With augmentation and two workers on, as a real image run would have them.
        """
        generator = np.random.default_rng(0)
        root = directory / "images"
        for label, name in enumerate(("circle", "bar", "corner")):
            (root / name).mkdir(parents=True)
            for i in range(30):
                pixels = generator.uniform(0, 40, (12, 12))
                if label == 0:
                    pixels[3:9, 3:9] += 200
                elif label == 1:
                    pixels[:, 5:7] += 200
                else:
                    pixels[:5, :5] += 200
                image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
                image.save(root / name / f"{i:03d}.png")
        return {
            "root": str(root),
            "image_size": 12,
            "channels": 1,
            "batch_size": 16,
            "crop_padding": 2,
            "flip": True,
            "num_workers": 2,
        }
