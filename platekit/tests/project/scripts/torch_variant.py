"""Which build of torch this machine should get: the CPU build, or a CUDA one its driver runs.

Run by ``make setup`` with the system's Python (standard library only). The NVIDIA driver
decides, never a CUDA toolkit: torch's CUDA builds bring their own CUDA libraries and need only
a driver new enough for them (``nvcc`` on a machine with no driver is no GPU). The driver is
read from ``nvidia-smi``, or, without it, from ``libcuda`` (``cuDriverGetVersion``).

- ``cu130`` (the default CUDA build, PyPI's torch on Linux x86_64): a driver for CUDA 13.0 or
  newer (Linux >= 580.65.06) and every GPU Turing or newer (compute capability >= 7.5:
  CUDA 13 dropped Maxwell, Pascal and Volta);
- ``cu126``: a driver for CUDA 12 (>= 525.60.13), or a pre-Turing GPU. torch 2.15 drops it;
- ``cpu``: no driver, or one too old for either.

    python3 scripts/torch_variant.py            # the variant, its package index, and why
    TORCH_VARIANT=cu126 python3 scripts/torch_variant.py   # a variant chosen by hand wins
"""

import ctypes
import os
import shutil
import subprocess
import sys

VARIANTS = ("cpu", "cu126", "cu130")
# The lowest driver CUDA version each CUDA build runs on (the driver's "CUDA Version").
NEEDS = {"cu130": (13, 0), "cu126": (12, 0)}
TURING = (7, 5)
# Where each build of torch 2.13.0 comes from (empty: the default index, PyPI, whose Linux
# x86_64 torch is the CUDA 13.0 build).
INDEX = {
    "cpu": "https://download.pytorch.org/whl/cpu",
    "cu126": "https://download.pytorch.org/whl/cu126",
    "cu130": "",
}


def from_nvidia_smi() -> tuple[tuple[int, int], list[tuple[int, int]], str] | None:
    """The driver's CUDA version, each GPU's compute capability, and the driver's version."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        header = subprocess.run(
            ["nvidia-smi"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    cuda = next((line for line in header.splitlines() if "CUDA Version:" in line), "")
    try:
        major, minor = cuda.split("CUDA Version:")[1].split()[0].split(".")[:2]
        rows = [line.split(",") for line in query.strip().splitlines() if line.strip()]
        capabilities = [tuple(int(part) for part in row[1].strip().split(".")[:2]) for row in rows]
        driver = rows[0][0].strip() if rows else "?"
    except (IndexError, ValueError):
        return None
    return (int(major), int(minor)), [(c[0], c[1]) for c in capabilities], driver


def from_libcuda() -> tuple[int, int] | None:
    """The CUDA version the driver's library supports, when nvidia-smi is absent."""
    try:
        library = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if library.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return version.value // 1000, (version.value % 1000) // 10


def decide() -> tuple[str, str]:
    """The variant and why, in words."""
    chosen = os.environ.get("TORCH_VARIANT", "auto")
    if chosen in VARIANTS:
        return chosen, f"TORCH_VARIANT={chosen} given"
    if chosen != "auto":
        sys.exit(f"error: TORCH_VARIANT={chosen} is not one of auto, {', '.join(VARIANTS)}")
    found = from_nvidia_smi()
    if found is None:
        cuda = from_libcuda()
        if cuda is None:
            return "cpu", "no NVIDIA driver found: no nvidia-smi, no libcuda"
        capabilities, driver = [], "libcuda"
    else:
        cuda, capabilities, driver = found
    said = f"NVIDIA driver {driver}, CUDA {cuda[0]}.{cuda[1]}"
    old = [c for c in capabilities if c < TURING]
    if cuda >= NEEDS["cu130"] and not old:
        return "cu130", said
    if cuda >= NEEDS["cu126"] and old:
        capability = f"{old[0][0]}.{old[0][1]}"
        return "cu126", f"{said}; a GPU of compute capability {capability}, older than CUDA 13"
    if cuda >= NEEDS["cu126"]:
        return "cu126", f"{said}: the cu130 build needs a driver >= 580.65.06"
    return "cpu", f"{said}: too old for torch's CUDA builds (12.x needs a driver >= 525.60.13)"


def main() -> None:
    variant, why = decide()
    other = "cpu" if variant != "cpu" else "cu130"
    print(variant)
    print(INDEX[variant])
    print(f"torch {variant} build ({why}); the other: make setup TORCH_VARIANT={other}")


if __name__ == "__main__":
    main()
