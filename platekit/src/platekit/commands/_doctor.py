"""Check the environment a run depends on: pins, driver, devices, precisions, backends, seeds.

python -m <package>.doctor            # one row per check; exit 1 if any fails
python -m <package>.doctor --json     # the same rows as JSON, for CI
python -m <package>.doctor --env      # and every version (torch.utils.collect_env's report)

Listing versions is ``torch.utils.collect_env``'s job; the doctor checks them against the
project's pins and probes what a run needs from the machine.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from lightning import seed_everything
from lightning.fabric.utilities.seed import pl_worker_init_function
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader, Dataset

from platekit._errors import first_line
from platekit._project import current

REBUILD = "rm -rf .venv && make setup (it picks the CUDA build the driver runs)"
NEWEST_BUILD = "13.0"  # torch 2.13's default CUDA build (cu130); cu126 for older drivers


@dataclass
class Check:
    name: str
    status: str  # "ok", "fail" or "skip"
    detail: str
    fix: str = ""


def pins() -> dict[str, str]:
    """``name -> version`` of the project's declared ``==`` pins: pyproject.toml's
    dependencies, or requirements.txt in a project baked before they moved there (empty if
    neither is found)."""
    import tomllib

    root = current().root
    declared: list[str] = []
    try:
        settings = tomllib.loads((root / "pyproject.toml").read_text())
        declared = [
            r for r in settings.get("project", {}).get("dependencies", []) if isinstance(r, str)
        ]
    except (OSError, tomllib.TOMLDecodeError):
        pass
    if not declared and (root / "requirements.txt").is_file():
        declared = (root / "requirements.txt").read_text().splitlines()
    found = {}
    for line in declared:
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            found[name.lower()] = version.strip()
    return found


def check_versions() -> Iterator[Check]:
    """Python against .python-version; every installed package against its declared pin."""
    version_file = current().root / ".python-version"
    wanted = version_file.read_text().strip() if version_file.is_file() else "3.11"
    ok = sys.version_info[:2] >= tuple(int(part) for part in wanted.split(".")[:2])
    yield Check(
        "python",
        "ok" if ok else "fail",
        f"{sys.version.split()[0]} (project: {wanted})",
        "" if ok else f"use Python {wanted} or newer",
    )
    pinned = pins()
    if not pinned:
        yield Check("pins", "skip", "no == pins found in pyproject.toml")
        return
    off = []
    for name, want in sorted(pinned.items()):
        try:
            installed = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            off.append((name, "missing", want))
            continue
        version = installed.version if "+" in want else installed.version.split("+")[0]
        if version != want and not editable(installed):  # a checkout's source is its own
            off.append((name, installed.version, want))
    if not off:
        packages = f"{len(pinned)} package{'' if len(pinned) == 1 else 's'}"
        yield Check("pins", "ok", f"{packages} as pyproject.toml pins them")
        return
    said = "; ".join(f"{name} {installed}, pinned {want}" for name, installed, want in off)
    fix = " ".join(f"{name}=={want}" for name, _, want in off)
    yield Check("pins", "fail", said, f"pip install {fix} (or make setup)")


def editable(distribution: metadata.Distribution) -> bool:
    """Whether a package is installed from a source folder (``pip install -e``)."""
    try:
        origin = json.loads(distribution.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return bool(isinstance(origin, dict) and origin.get("dir_info", {}).get("editable"))


def devices() -> list[str]:
    found = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append("mps")
    return [*found, "cpu"]


def describe(device: str) -> str:
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        return (
            f"{props.name}, capability {props.major}.{props.minor}, "
            f"{props.total_memory / 2**30:.1f} GiB"
        )
    return (
        "Apple GPU"
        if device == "mps"
        else f"{os.cpu_count()} cores, torch threads {torch.get_num_threads()}"
    )


def matmul_backward(device: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Gradient of sum((a @ b)^2) w.r.t. a, computed on ``device`` and copied back."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=generator)
    b = torch.randn(64, 64, generator=generator)
    a_dev = a.to(device).requires_grad_(True)
    if dtype is None:
        (a_dev @ b.to(device)).pow(2).sum().backward()
    else:
        with torch.autocast(device_type=device.split(":")[0], dtype=dtype):
            (a_dev @ b.to(device)).float().pow(2).sum().backward()
    assert a_dev.grad is not None  # backward() filled it
    return a_dev.grad.cpu()


def driver_cuda() -> tuple[str, str] | None:
    """The NVIDIA driver's version and the newest CUDA it runs, from ``nvidia-smi``'s header;
    None without a driver."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        header = subprocess.run(
            ["nvidia-smi"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    driver = re.search(r"Driver Version:\s*([\d.]+)", header)
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", header)
    if driver is None or cuda is None:
        return None
    return driver.group(1), cuda.group(1)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def check_driver() -> Iterator[Check]:
    """The driver's CUDA version against the one torch was built for."""
    found = driver_cuda()
    built = torch.version.cuda
    if found is None:
        yield Check("driver", "skip", "no NVIDIA driver (nvidia-smi) found")
        return
    driver, runs = found
    said = f"NVIDIA driver {driver} runs CUDA <= {runs}"
    if built is None:
        yield Check(
            "driver", "fail", f"{said}, but torch {torch.__version__} is a CPU-only build", REBUILD
        )
    elif version_tuple(built)[0] > version_tuple(runs)[0]:  # a 12.x driver runs any 12.x build
        fix = (
            f"update the NVIDIA driver (CUDA {built} needs >= 580 on Linux), or use the "
            "CUDA 12.6 build: rm -rf .venv && make setup TORCH_VARIANT=cu126"
        )
        yield Check("driver", "fail", f"{said}; torch was built for CUDA {built}", fix)
    else:
        yield Check("driver", "ok", f"{said}; torch was built for CUDA {built}")


def check_devices() -> Iterator[Check]:
    """Each device computes a matmul and its backward pass; the result must match the CPU's."""
    expected = matmul_backward("cpu")
    for device in devices():
        try:
            got = matmul_backward(device)
            close = torch.allclose(got, expected, rtol=1e-2, atol=1e-2)
            yield Check(
                f"device {device}",
                "ok" if close else "fail",
                f"{describe(device)}; matmul+backward {'matches' if close else 'differs from'} CPU",
                "" if close else "update the driver or reinstall torch",
            )
        except Exception as error:  # any failure here is the finding
            yield Check(
                f"device {device}",
                "fail",
                f"{type(error).__name__}: {first_line(error)}",
                "update the driver or reinstall torch",
            )
            continue
        yield check_precisions(device, expected)


def check_precisions(device: str, expected: torch.Tensor) -> Check:
    """Autocast in bf16 and fp16 for real; close to fp32 within 5% (relative norm)."""
    works: list[str] = []
    fails: list[str] = []
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        try:
            error = (matmul_backward(device, dtype) - expected).norm() / expected.norm()
            ok = bool(error < 0.05)
        except (RuntimeError, TypeError):  # not supported on this device
            ok = False
        (works if ok else fails).append(name)
    detail = f"mixed precision works: {', '.join(works) or 'none'}"
    if fails:
        detail += f"; not available: {', '.join(fails)}"
    return Check(f"precision {device}", "ok", detail)


def check_distributed() -> Iterator[Check]:
    if not dist.is_available():
        yield Check(
            "distributed",
            "fail",
            "torch.distributed is not available",
            "install an official torch build",
        )
        return
    yield one_process_group("gloo", "cpu")
    if torch.cuda.is_available():
        yield one_process_group("nccl", "cuda:0")


def one_process_group(backend: str, device: str) -> Check:
    """A real one-process group: init, all_reduce, destroy."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            store = dist.FileStore(str(Path(folder) / "store"), 1)
            dist.init_process_group(backend, store=store, rank=0, world_size=1)
            value = torch.ones(1, device=device)
            dist.all_reduce(value)
            dist.destroy_process_group()
            return Check(f"backend {backend}", "ok", f"all_reduce on {device} works")
        except Exception as error:  # the failure is the finding
            return Check(
                f"backend {backend}",
                "fail",
                first_line(error),
                f"multi-{device.split(':')[0]} training needs {backend}; reinstall torch",
            )


class RandomRows(Dataset[torch.Tensor]):
    """Each row is drawn from the worker's torch RNG: equal only if worker seeding is."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.rand(2)


def seeded_batches() -> list[torch.Tensor]:
    seed_everything(0, workers=True, verbose=False)
    loader = DataLoader(
        RandomRows(),
        batch_size=4,
        num_workers=2,
        worker_init_fn=pl_worker_init_function,
        generator=torch.Generator().manual_seed(0),
    )
    return list(loader)


def check_seeds() -> Iterator[Check]:
    """Seeded draws and a seeded 2-worker DataLoader repeat; deterministic mode switches on."""

    def draws() -> tuple[list[float], list[float], float]:
        seed_everything(0, verbose=False)
        return torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random()

    same = draws() == draws()
    yield Check(
        "seeded draws",
        "ok" if same else "fail",
        "torch, numpy and random repeat with a seed",
        "" if same else "something reseeds the global RNGs; check imported plugins",
    )
    try:
        first, second = seeded_batches(), seeded_batches()
        same = all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
        yield Check(
            "seeded DataLoader",
            "ok" if same else "fail",
            "2 workers yield the same batches twice" if same else "2 workers gave other batches",
            "" if same else "pass a seeded generator and worker_init_fn to DataLoader",
        )
    except Exception as error:  # e.g. no shared memory for workers
        yield Check(
            "seeded DataLoader",
            "fail",
            first_line(error),
            "worker processes cannot start: use data.num_workers=0, or give the container "
            "more /dev/shm",
        )
    for device in devices():
        yield check_deterministic(device)


def check_deterministic(device: str) -> Check:
    """A training step of the default CNN under ``trainer.deterministic=true`` on ``device``.

    Lightning's deterministic mode switches on ``torch.use_deterministic_algorithms`` and
    sets ``CUBLAS_WORKSPACE_CONFIG``; so does this check. An op with no deterministic
    kernel on the device raises here, naming itself.
    """
    previous = torch.are_deterministic_algorithms_enabled()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # as Lightning sets it
    try:
        torch.use_deterministic_algorithms(True)
        deterministic_step(device)
        return Check(f"deterministic {device}", "ok", "a CNN training step runs deterministically")
    except Exception as error:  # the failure is the finding
        return Check(
            f"deterministic {device}",
            "fail",
            first_line(error),
            "an op above has no deterministic kernel here: replace it, or train with "
            "trainer.deterministic=false (then resume is not bitwise exact)",
        )
    finally:
        torch.use_deterministic_algorithms(previous)


def deterministic_step(device: str) -> None:
    """Forward and backward of a small CNN (convolution, norm, pooling) on ``device``."""
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    ).to(device)
    images = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(0)).to(device)
    loss = torch.nn.functional.cross_entropy(net(images), torch.arange(4, device=device))
    loss.backward()


CHECKS: list[Callable[[], Iterator[Check]]] = [
    check_versions,
    check_driver,
    check_devices,
    check_distributed,
    check_seeds,
]


def run_checks() -> list[Check]:
    return [check for group in CHECKS for check in group()]


def show(checks: list[Check], console: Console) -> None:
    table = Table("check", "status", "detail")
    colours = {"ok": "green", "fail": "red", "skip": "yellow"}
    for check in checks:
        table.add_row(check.name, f"[{colours[check.status]}]{check.status}[/]", check.detail)
    console.print(table)
    for check in checks:
        if check.status == "fail":
            console.print(f"[red]fail[/] {check.name}: {check.fix}")
    console.print("every version (torch, CUDA, cuDNN, CPU, packages): doctor --env")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--env", action="store_true", help="print torch's environment report")
    args = parser.parse_args(argv)
    if args.env:  # before the checks; to stderr under --json, which keeps stdout JSON
        from torch.utils import collect_env

        report = collect_env.get_pretty_env_info()
        print(report, file=sys.stderr if args.json else sys.stdout)
    checks = run_checks()
    if args.json:
        sys.stdout.write(json.dumps([asdict(c) for c in checks], indent=2) + "\n")
    else:
        show(checks, Console())
    sys.exit(1 if any(c.status == "fail" for c in checks) else 0)


if __name__ == "__main__":
    main()
