"""Images decode to the same floats however large they are, in bounded memory."""

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support import module

images = module("data._images")


def png(mode: str, height: int = 700, width: int = 333) -> bytes:
    rng = np.random.default_rng(0)
    bands = {"L": (), "LA": (2,), "RGB": (3,), "RGBA": (4,)}
    if mode == "I;16":
        picture = Image.fromarray(rng.integers(0, 65536, (height, width), dtype=np.uint16))
    else:
        pixels = rng.integers(0, 256, (height, width, *bands.get(mode, (3,))), dtype=np.uint8)
        picture = Image.fromarray(pixels, "RGB" if mode == "P" else mode)
        picture = picture.convert("P") if mode == "P" else picture
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA", "P", "I;16"])
@pytest.mark.parametrize("channels", [1, 3])
def test_a_picture_converted_in_strips_is_the_picture_converted_whole(
    mode: str, channels: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = png(mode)
    for size in ((8, 8), (900, 400)):  # shrunk and enlarged
        strips = images.load_image(io.BytesIO(data), channels, size)
        monkeypatch.setattr(images, "STRIP_ROWS", 10**9)  # the whole picture at once
        whole = images.load_image(io.BytesIO(data), channels, size)
        monkeypatch.undo()
        assert strips.dtype == whole.dtype == np.float32
        assert np.array_equal(strips, whole), (mode, channels, size)


DECODE = """
import io, sys
from pathlib import Path
from platekit.data._images import load_image

def status_mib(field):  # this process's (a forked child's ru_maxrss starts at its parent's)
    lines = Path("/proc/self/status").read_text().splitlines()
    return int(next(l for l in lines if l.startswith(field)).split()[1]) / 1024

data = Path(sys.argv[1]).read_bytes()
before = status_mib("VmRSS:")
load_image(io.BytesIO(data), int(sys.argv[2]), (8, 8))
print(status_mib("VmHWM:") - before)  # the peak above what was resident before decoding
"""


@pytest.mark.slow
@pytest.mark.parametrize(("channels", "bound_mib"), [(1, 260), (3, 450)])
def test_a_4096_square_rgba_picture_decodes_in_bounded_memory(
    channels: int, bound_mib: int, tmp_path: Path
) -> None:
    """The decoded file (64 MiB), the result (64 MiB grey, 192 MiB RGB) and a plane for the
    resize: no float copy of the picture's 4 bands (256 MiB) and its products (642 MiB in all,
    for either, before the conversion went in strips)."""
    pixels = np.random.default_rng(0).integers(0, 256, (4096, 4096, 4), np.uint8)
    path = tmp_path / "large.png"
    Image.fromarray(pixels).save(path, compress_level=1)
    result = subprocess.run(
        [sys.executable, "-c", DECODE, str(path), str(channels)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    grew = float(result.stdout.split()[-1])
    print(f"\n4096x4096 RGBA PNG to {channels} channel(s): peak RSS +{grew:.0f} MiB")
    assert grew < bound_mib, grew
