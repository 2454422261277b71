"""Run the GPU tier and the bench on CUDA; write one report (gpu_report.json) and print a table.

    make gpu-check                                  # with .venv (built from the lock)
    make gpu-check PYTHON=/opt/conda/bin/python     # with a torch already installed there
    python scripts/gpu_check.py [--report PATH] [--no-bench] [-k EXPR]

A machine with its own CUDA build of torch may lack some of the project's pure-Python
packages (hydra-core, omegaconf, ...): ``--missing`` lists the pins of requirements.lock that
are not installed at all, ``--install-missing`` installs exactly those with ``--no-deps``
(``make gpu-deps PYTHON=...``). Installed packages, torch among them, are never touched.

Each check is one test of ``pytest -m gpu``; its figures are what the test records with
``record_property``, read back from pytest's JUnit XML. Without a CUDA device every check is
skipped with its reason and the exit status is 0; a failed check or bench exits 1.
Only the standard library is imported at the top, so a missing package is reported, not
raised.
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
# Never installed by --install-missing: the machine's own torch and its CUDA libraries stay.
KEEP_OWN = ("torch", "triton", "nvidia-")
# What the tier imports, by module name: distribution name.
NEEDED = {
    "torch": "torch",
    "lightning": "lightning",
    "hydra": "hydra-core",
    "omegaconf": "omegaconf",
    "pytest": "pytest",
    "onnxruntime": "onnxruntime",
    "PIL": "pillow",
}
NO_CUDA = "no CUDA device visible"


def lock_pins() -> dict[str, str]:
    """``name -> version`` for every ``name==version`` line of requirements.lock."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        name, sep, version = line.split("#")[0].split(";")[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
    return pins


def missing_pins() -> list[str]:
    """The lock's pins whose package is not installed at all (torch and CUDA libs excluded)."""
    missing = []
    for name, version in lock_pins().items():
        if name.startswith(KEEP_OWN):
            continue
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(f"{name}=={version}")
    return missing


def install_missing() -> int:
    missing = missing_pins()
    if not missing:
        print("every pin of requirements.lock is installed (or left to the machine: torch)")
        return 0
    command = [sys.executable, "-m", "pip", "install", "--no-deps", *missing]
    print(" ".join(command))
    return subprocess.run(command, check=False).returncode


def package_name() -> str:
    return next(p.name for p in sorted((ROOT / "src").iterdir()) if (p / "__init__.py").is_file())


def environment() -> dict[str, Any]:
    """The machine: Python, torch and its CUDA, the driver and each visible device."""
    import torch

    found: dict[str, Any] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "driver": driver_version(),
        "cuda_available": torch.cuda.is_available(),
        "devices": [],
    }
    for name in ("lightning", "onnxruntime"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            found["devices"].append(
                {
                    "index": index,
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "bf16": torch.cuda.is_bf16_supported(including_emulation=False),
                }
            )
    return found


def driver_version() -> str | None:
    """The NVIDIA driver, from nvidia-smi (None where there is none)."""
    if shutil.which("nvidia-smi") is None:
        return None
    result = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = result.stdout.split()
    return lines[0] if result.returncode == 0 and lines else None


def run_tier(workdir: Path, select: str | None) -> tuple[list[dict[str, Any]], int]:
    """``pytest -m gpu`` with a JUnit XML report; each test case as one check."""
    xml = workdir / "gpu.xml"
    command = [
        sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-rs",
        "-o", "junit_family=xunit1", f"--junitxml={xml}",
        *(["-k", select] if select else []),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=run_env(), check=False)
    if not xml.is_file():
        return [], result.returncode or 1
    return parse_junit(xml), result.returncode


def parse_junit(path: Path) -> list[dict[str, Any]]:
    checks = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        check: dict[str, Any] = {
            "name": f"{module}::{case.get('name')}",
            "status": "passed",
            "seconds": round(float(case.get("time", 0)), 2),
            "figures": {
                item.get("name"): parse_value(item.get("value", ""))
                for item in case.iter("property")
            },
        }
        for status in ("failure", "error", "skipped"):
            found = case.find(status)
            if found is not None:
                check["status"] = {"failure": "failed"}.get(status, status)
                check["reason"] = (found.get("message") or "").strip()
                break
        checks.append(check)
    return checks


def parse_value(text: str) -> Any:
    """A recorded figure back as the number or boolean it was, else the text."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run_bench(workdir: Path) -> dict[str, Any]:
    """make bench on CUDA (default model and data): step speed per precision, data waits."""
    import torch

    if not torch.cuda.is_available():
        return {"status": "skipped", "reason": f"{NO_CUDA} (torch {torch.__version__})"}
    out = workdir / "bench"
    command = [
        sys.executable, "-m", f"{package_name()}.bench", "trainer=gpu", f"hydra.run.dir={out}",
    ]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(
        command, cwd=ROOT, env=run_env(), capture_output=True, text=True, check=False
    )
    seconds = round(time.perf_counter() - started, 1)
    if result.returncode != 0 or not (out / "bench.json").is_file():
        tail = (result.stdout + result.stderr)[-2000:]
        return {"status": "failed", "seconds": seconds, "reason": tail}
    results = json.loads((out / "bench.json").read_text())
    return {"status": "passed", "seconds": seconds, "results": results}


def run_env() -> dict[str, str]:
    """The package importable from src/ (no install needed), tests' helpers too."""
    paths = [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def table(report: dict[str, Any]) -> list[str]:
    machine = report["machine"]
    devices = ", ".join(
        f"cuda:{d['index']} {d['name']} ({d['memory_gib']} GiB, sm {d['capability']})"
        for d in machine["devices"]
    )
    lines = [
        f"GPU check: {devices or NO_CUDA}",
        f"  driver {machine['driver'] or '-'}, CUDA runtime {machine['cuda_runtime'] or '-'}, "
        f"cuDNN {machine['cudnn'] or '-'}, torch {machine['torch']}, "
        f"lightning {machine['lightning']}, Python {machine['python']}",
    ]
    width = max([len(c["name"]) for c in report["checks"]] + [20])
    for check in [*report["checks"], {"name": "bench", **report["bench"]}]:
        detail = check.get("reason", "") if check["status"] != "passed" else ""
        if check["status"] == "passed":
            detail = figures_text(check.get("figures") or bench_figures(check))
        first = detail.strip().splitlines()[-1] if detail.strip() else ""
        lines.append(f"  {check['status']:<8} {check['name']:<{width}} {first[:160]}")
    counts = report["summary"]
    lines.append("  " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return lines


def figures_text(figures: dict[str, Any]) -> str:
    parts = [
        f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in figures.items()
    ]
    return "; ".join(parts)


def bench_figures(check: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of bench.json: steps/s at the trained precision and at each other
    one tried, and whether the data path holds the steps up."""
    results = check.get("results")
    if not results:
        return {}
    setup, rate = results["setup"], results["step"]["steps_per_s"]
    figures = {f"{setup['precision']} steps/s": rate, "data": results["data"]["verdict"]}
    for trial in results["tried"]:
        key, value = trial["override"].split("=", 1)
        if key == "trainer.precision":
            figures[f"{value} steps/s"] = rate * trial["ratio"]
    return figures


def summary(checks: list[dict[str, Any]], bench: dict[str, Any]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for check in [*checks, bench]:
        counts[check["status"]] = counts.get(check["status"], 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("gpu_report.json"))
    parser.add_argument("--no-bench", action="store_true", help="run the tier only")
    parser.add_argument("-k", dest="select", help="run only the checks pytest -k selects")
    parser.add_argument("--missing", action="store_true", help="list the lock's missing pins")
    parser.add_argument(
        "--install-missing", action="store_true", help="pip install --no-deps the missing pins"
    )
    args = parser.parse_args(argv)
    if args.missing:
        print(" ".join(missing_pins()))
        return 0
    if args.install_missing:
        return install_missing()
    absent = [dist for module, dist in NEEDED.items() if importlib.util.find_spec(module) is None]
    if absent:
        print(
            f"error: {sys.executable} lacks {', '.join(absent)}; install the lock's missing "
            f"pins without touching torch: make gpu-deps PYTHON={sys.executable}",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        checks, pytest_status = run_tier(Path(folder), args.select)
        bench = (
            {"status": "skipped", "reason": "--no-bench"}
            if args.no_bench
            else run_bench(Path(folder))
        )
    if not checks:
        checks = [{"name": "pytest -m gpu", "status": "error", "reason": f"exit {pytest_status}"}]
    report = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": environment(),
        "checks": checks,
        "bench": bench,
        "summary": summary(checks, bench),
    }
    args.report.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    for line in table(report):
        print(line)
    print(f"report: {args.report.resolve()}")
    failed = report["summary"]["failed"] + report["summary"]["error"]
    return 1 if failed or pytest_status not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main())
