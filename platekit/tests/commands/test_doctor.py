"""The doctor: one row per check, exit 1 with a fix when one fails."""

import json
import os
import re
from importlib import metadata
from pathlib import Path

import pytest
import torch
from rich.console import Console

from support import module, run_cli

doctor = module("doctor")


def test_a_version_off_its_pin_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lightning = metadata.version("lightning")
    pinned = {"torch": "0.0.1", "lightning": lightning, "no-such-dist": "1.0"}
    monkeypatch.setattr(doctor, "pins", lambda: pinned)
    checks = {c.name: c for c in doctor.check_versions()}
    torch_version = metadata.version("torch")
    assert checks["pins"].status == "fail"
    assert checks["pins"].detail == (
        f"no-such-dist missing, pinned 1.0; torch {torch_version}, pinned 0.0.1"
    )
    assert checks["pins"].fix == "pip install no-such-dist==1.0 torch==0.0.1 (or make setup)"
    monkeypatch.setattr(doctor, "pins", lambda: {"lightning": lightning})
    [_, pins] = doctor.check_versions()
    assert (pins.status, pins.detail) == ("ok", "1 package as pyproject.toml pins them")


def test_every_version_is_left_to_torchs_environment_report(tmp_path: Path) -> None:
    result = run_cli("doctor", "--env", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "PyTorch version:" in result.stdout  # torch.utils.collect_env's report
    assert "Is debug build:" in result.stdout
    as_json = run_cli("doctor", "--env", "--json", cwd=tmp_path)
    assert "PyTorch version:" in as_json.stderr  # stdout stays the checks' JSON
    assert {c["name"] for c in json.loads(as_json.stdout)} >= {"python", "pins"}


@pytest.mark.slow
def test_doctor_passes_here_and_prints_json(tmp_path: Path) -> None:
    result = run_cli("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    expected = {"python", "pins", "device cpu", "precision cpu"}
    expected |= {"backend gloo", "seeded draws", "seeded DataLoader", "deterministic cpu"}
    assert expected <= set(checks)
    assert all(c["status"] in ("ok", "skip") for c in checks.values())


def test_deterministic_check_runs_a_cnn_step_and_restores_the_mode() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    check = doctor.check_deterministic("cpu")
    assert (check.name, check.status) == ("deterministic cpu", "ok"), check.detail
    assert torch.are_deterministic_algorithms_enabled() == before


def test_table_has_a_row_per_check_and_a_fix_per_failure() -> None:
    console = Console(record=True, width=120)
    checks = [
        doctor.Check("torch", "ok", "2.13.0"),
        doctor.Check("cuda", "fail", "CPU build", "reinstall"),
    ]
    doctor.show(checks, console)
    text = console.export_text()
    assert "torch" in text
    assert "2.13.0" in text
    assert "fail cuda: reinstall" in text


def fake_nvidia_smi(folder: Path, driver: str, cuda: str) -> str:
    """A PATH whose nvidia-smi prints the header of a driver running CUDA ``cuda``."""
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"echo '| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}  |'\n"
    )
    script.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


@pytest.mark.parametrize(
    ("built", "driver", "cuda", "status", "said"),
    [
        (None, "580.95.05", "13.0", "fail", r"runs CUDA <= 13.0, but torch .* is a CPU-only build"),
        ("13.0", "550.54.14", "12.4", "fail", r"runs CUDA <= 12.4; torch was built for CUDA 13.0"),
        ("12.6", "550.54.14", "12.4", "ok", r"runs CUDA <= 12.4; torch was built for CUDA 12.6"),
        ("13.0", "580.95.05", "13.0", "ok", r"runs CUDA <= 13.0; torch was built for CUDA 13.0"),
    ],
)
def test_the_drivers_cuda_is_checked_against_torchs_build(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    built: str | None,
    driver: str,
    cuda: str,
    status: str,
    said: str,
) -> None:
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path, driver, cuda))
    monkeypatch.setattr(torch.version, "cuda", built)
    [check] = doctor.check_driver()
    assert check.status == status
    assert re.search(said, check.detail), check.detail
    if built is None:
        assert check.fix == "rm -rf .venv && make setup (it picks the CUDA build the driver runs)"
    elif status == "fail":
        assert "make setup TORCH_VARIANT=cu126" in check.fix


def test_without_a_driver_the_check_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    [check] = doctor.check_driver()
    assert (check.status, check.detail) == ("skip", "no NVIDIA driver (nvidia-smi) found")
