"""A .npy or .npz input is judged by its header before any of it is read or decompressed.

A 1 MB .npz whose member inflates to 1.1 GB, a member claiming another shape than the
model's inputs, a header claiming more bytes than the member holds: each is one line, under
a memory cap the test sets, with the process's peak memory far below the claimed size.
"""

import io
import resource
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support import PACKAGE, cli_env

CAP = 3 * 2**30  # the address space each predict below may take
CHUNK = 64 * 2**20


def header(shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()  # the magic string, then the header


def npz(path: Path, shape: tuple[int, ...], data_bytes: int | None = None) -> Path:
    """An .npz of one member ``x`` whose header claims ``shape`` (float32), followed by
    ``data_bytes`` zero bytes (by default what the shape needs), deflated as written."""
    need = int(np.prod(shape)) * 4 if data_bytes is None else data_bytes
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("x.npy", "w", force_zip64=True) as member,
    ):
        member.write(header(shape))
        zeros = bytes(min(CHUNK, need))
        while need > 0:
            member.write(zeros[: min(CHUNK, need)])
            need -= CHUNK
    return path


def predict(tmp_path: Path, inputs: Path) -> subprocess.CompletedProcess[str]:
    script = (
        "import atexit, runpy, sys\n"
        "def peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM'):\n"
        "            sys.stderr.write(line)\n"
        "atexit.register(peak)\n"
        f"sys.argv = ['predict', 'model_path={tmp_path / 'model.ckpt'}', 'inputs={inputs}']\n"
        f"runpy.run_module('{PACKAGE}.predict', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=cli_env(), capture_output=True,
        text=True, timeout=300, preexec_fn=lambda: resource.setrlimit(
            resource.RLIMIT_AS, (CAP, CAP)
        ),
    )  # fmt: skip


def peak_mib(result: subprocess.CompletedProcess[str]) -> float:
    [line] = [line for line in result.stderr.splitlines() if line.startswith("VmHWM")]
    return int(line.split()[1]) / 1024


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "shape", "data_bytes", "words"),
    [
        ("bomb", (4_300_000, 1, 8, 8), None, "reading it takes about"),  # 1.1 GB inflated
        ("wrong_shape", (1000, 1, 64, 64), None, "has shape (1000, 1, 64, 64); expected"),
        ("short_member", (100_000_000, 1, 8, 8), 1000, "its header claims"),
        ("bomb_wrong_shape", (16_000, 1, 128, 128), None, "expected (N, 1, 8, 8)"),
    ],
)
def test_an_npz_member_is_refused_from_its_header(
    trained: dict[str, Any],
    tmp_path: Path,
    name: str,
    shape: tuple[int, ...],
    data_bytes: int | None,
    words: str,
) -> None:
    (tmp_path / "model.ckpt").symlink_to(Path(trained["metrics"]["best_checkpoint"]))
    inputs = npz(tmp_path / f"{name}.npz", shape, data_bytes)
    assert inputs.stat().st_size < 8 * 2**20  # a few MB on disk
    result = predict(tmp_path, inputs)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "MemoryError" not in output
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output[-3000:]
    assert words in errors[0], errors[0]
    assert peak_mib(result) < 800  # nothing inflated: the claimed array is 1 GB and more


@pytest.mark.slow
def test_an_npy_of_another_shape_is_refused_before_it_is_read(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "model.ckpt").symlink_to(Path(trained["metrics"]["best_checkpoint"]))
    inputs = tmp_path / "wide.npy"
    with inputs.open("wb") as handle:
        handle.write(header((3, 1, 9, 9)))
        handle.write(bytes(3 * 81 * 4))
    result = predict(tmp_path, inputs)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "has shape (3, 1, 9, 9); expected (N, 1, 8, 8)" in result.stdout
