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


def test_torch_is_pinned_by_hash_where_the_lock_holds_that_pythons_build() -> None:
    # The lock was made on 3.11 with PyTorch's CPU index unreachable: its torch line holds
    # the cp311 CPU build's hash and an `# unhashed:` line says the others are missing, so
    # 3.12 and 3.13 install torch by its version alone (make setup prints that line first).
    baked = TEMPLATE / "{{cookiecutter.project_slug}}"
    probe = (
        "import sys; sys.path.insert(0, 'scripts'); import torch_pin; "
        "lock = open('requirements.lock').read(); "
        "print(*(torch_pin.torch_pin(lock, v) for v in ('3.11', '3.12', '3.13')), sep='\\n')"
    )
    lines = subprocess.run(
        [sys.executable, "-c", probe], cwd=baked, capture_output=True, text=True, timeout=60,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    assert lines[0].startswith("torch==2.13.0 --hash=sha256:")
    assert lines[1:] == ["torch==2.13.0", "torch==2.13.0"]
    lock = (baked / "requirements.lock").read_text()
    assert "# unhashed: torch 2.13.0's CPU builds for Pythons other than 3.11" in lock
    hashed = lock.replace("# unhashed: torch", "# (no longer unhashed)")  # a complete lock
    assert torch_pin_of(hashed, "3.12").startswith("torch==2.13.0 --hash=sha256:")


def torch_pin_of(lock: str, python: str) -> str:
    import importlib.util

    path = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts" / "torch_pin.py"
    spec = importlib.util.spec_from_file_location("torch_pin", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.torch_pin(lock, python)


def test_ctrl_c_during_make_setup_leaves_no_ticker_behind(tmp_path: Path) -> None:
    # A step's line prints a dot every 10 s from a ticker process: Ctrl-C (SIGINT to the
    # foreground group) ends make setup, and the ticker with it, so the output ends too.
    import select
    import signal
    import time

    from conftest import bake

    project = bake(tmp_path)
    base_python = str(Path(sys.base_prefix) / "bin" / "python3")
    started = subprocess.Popen(
        ["make", "setup", f"PYTHON={base_python}", "TORCH_VARIANT=cpu"], cwd=project,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    assert started.stdout is not None
    seen = b""
    deadline = time.monotonic() + 120
    while b"pip and uv, pinned by pip.lock" not in seen and time.monotonic() < deadline:
        seen += started.stdout.read1(4096)  # the venv step is done, the next one runs
    os.killpg(started.pid, signal.SIGINT)
    started.wait(timeout=60)
    assert started.returncode != 0
    ended, closed = time.monotonic(), False
    while time.monotonic() - ended < 5 and not closed:  # end of file: every writer is gone
        ready, _, _ = select.select([started.stdout], [], [], 0.5)
        closed = bool(ready) and started.stdout.read1(4096) == b""
    listed = subprocess.run(
        ["pgrep", "-a", "-g", str(started.pid)], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    # An exited process not yet reaped (``<defunct>``) runs nothing and holds no output.
    leftover = "\n".join(line for line in listed if not line.endswith("<defunct>"))
    if leftover:
        os.killpg(started.pid, signal.SIGKILL)
    assert closed, f"the output is still open 5 s after make ended; left running: {leftover}"
    assert leftover == ""
