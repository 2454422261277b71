"""make gpu-check on a machine without CUDA: every check skipped with its reason, exit 0."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from support import ROOT, compose_config, module, read_json

SCRIPT = ROOT / "scripts" / "gpu_check.py"


@pytest.mark.slow  # a fresh pytest collecting every test module: ~10-20 s
@pytest.mark.bake  # it collects the bake's own tests/ (the gpu tier)
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible: the tier runs")
def test_without_cuda_every_check_is_skipped_with_its_reason(tmp_path: Path) -> None:
    report_path = tmp_path / "gpu_report.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), f"--report={report_path}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = read_json(report_path)
    names = {check["name"].split("::")[1].split("[")[0] for check in report["checks"]}
    assert {
        "test_mixed_precision_pays_on_64px_images",
        "test_resume_on_cuda_is_bitwise_exact",
    } <= names
    assert {"test_doctor_cuda_checks_pass", "test_torchrun_one_node_all_gpus"} <= names
    for check in [*report["checks"], report["bench"]]:
        assert check["status"] == "skipped", check
        assert check["reason"].startswith("no CUDA device visible"), check
    assert report["summary"]["passed"] == report["summary"]["failed"] == 0
    assert report["machine"]["cuda_available"] is False
    assert report["machine"]["torch"] == torch.__version__
    assert "GPU check: no CUDA device visible" in result.stdout
    assert "skipped  test_gpu::test_resume_on_cuda_is_bitwise_exact[0]" in result.stdout


@pytest.mark.bake
def test_missing_pins_come_from_the_lock_and_never_name_torch() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--missing"], capture_output=True, text=True, check=True
    )
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    for pin in result.stdout.split():
        assert pin in lock
        assert not pin.startswith(("torch==", "nvidia-", "triton=="))


@pytest.mark.slow
def test_the_reports_bench_figures_are_steps_per_s_per_precision_and_the_data_verdict(
    tmp_path: Path,
) -> None:
    """gpu-check reads make bench's bench.json: the trained precision's steps/s, each other
    precision tried (from its measured ratio) and whether the data path holds steps up."""
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    quick = ["bench.steps=2", "bench.warmup=1", "bench.rounds=1", "bench.data_batches=2"]
    results = module("bench").bench(
        compose_config(tmp_path, [*quick, "trainer.accelerator=cpu"], "bench")
    )
    figures = gpu_check.bench_figures({"results": results})
    rate = results["step"]["steps_per_s"]
    [mixed] = [t for t in results["tried"] if t["override"].startswith("trainer.precision=")]
    assert figures == {
        "32-true steps/s": rate,
        "data": results["data"]["verdict"],
        "bf16-mixed steps/s": pytest.approx(rate * mixed["ratio"]),
    }
