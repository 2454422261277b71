"""make setup picks torch's build from the NVIDIA driver, never from a CUDA toolkit: with no
driver (this machine has nvcc and none) the CPU build; with a fake ``nvidia-smi`` on PATH, the
CUDA build the driver runs, and the one line that says which and how to pick the other."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEMPLATE

SCRIPT = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts" / "torch_variant.py"


def fake_nvidia_smi(folder: Path, cuda: str, capability: str) -> None:
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--query-gpu=driver_version,compute_cap" ]; then\n'
        f"  echo '570.86.10, {capability}'; exit 0\nfi\n"
        f"echo '| NVIDIA-SMI 570.86.10   Driver Version: 570.86.10   CUDA Version: {cuda} |'\n"
    )
    script.chmod(0o755)


def variant(path: str, **env: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "PATH": path, **env},
    )  # fmt: skip
    return result.stdout.splitlines()


def test_no_driver_gets_the_cpu_build_whatever_toolkit_is_installed(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda" / "bin"
    toolkit.mkdir(parents=True)
    (toolkit / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0'\n")
    (toolkit / "nvcc").chmod(0o755)
    lines = variant(f"{toolkit}:/usr/bin:/bin")
    assert lines[:2] == ["cpu", "https://download.pytorch.org/whl/cpu"]
    assert lines[2] == (
        "torch cpu build (no NVIDIA driver found: no nvidia-smi, no libcuda); the other: "
        "make setup TORCH_VARIANT=cu130"
    )


@pytest.mark.parametrize(
    ("cuda", "capability", "expected", "said"),
    [
        ("13.0", "9.0", "cu130", "NVIDIA driver 570.86.10, CUDA 13.0)"),
        ("13.0", "6.1", "cu126", "a GPU of compute capability 6.1, older than CUDA 13"),
        ("12.4", "8.6", "cu126", "CUDA 12.4: the cu130 build needs a driver >= 580.65.06"),
        ("11.8", "8.6", "cpu", "too old for torch's CUDA builds"),
    ],
)
def test_a_driver_gets_the_cuda_build_it_runs(
    tmp_path: Path, cuda: str, capability: str, expected: str, said: str
) -> None:
    fake_nvidia_smi(tmp_path, cuda, capability)
    lines = variant(f"{tmp_path}:/usr/bin:/bin")
    assert lines[0] == expected
    assert lines[1] == {"cpu": "https://download.pytorch.org/whl/cpu",
                        "cu126": "https://download.pytorch.org/whl/cu126", "cu130": ""}[expected]  # fmt: skip
    assert said in lines[2]
    assert lines[2].endswith(f"TORCH_VARIANT={'cpu' if expected != 'cpu' else 'cu130'}")


def test_a_variant_given_by_hand_wins_and_a_wrong_one_is_one_line(tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path, "13.0", "9.0")
    assert variant(f"{tmp_path}:/usr/bin:/bin", TORCH_VARIANT="cpu")[0] == "cpu"
    wrong = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "TORCH_VARIANT": "cu128"},
    )  # fmt: skip
    assert wrong.returncode == 1
    assert (
        wrong.stderr.strip() == "error: TORCH_VARIANT=cu128 is not one of auto, cpu, cu126, cu130"
    )
