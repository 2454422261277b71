"""The baked project's GPU tier, run where a CUDA device is visible: `make gpu-check`'s script
in a fresh bake, with this interpreter's own torch (as `make gpu-check PYTHON=...` runs it)."""

import json
from pathlib import Path

import pytest
import torch

from conftest import python_in, tail


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")
def test_baked_gpu_tier_passes(default_project: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "gpu_report.json"
    result = python_in(
        default_project, "scripts/gpu_check.py", f"--report={report_path}", timeout=3600
    )
    print(tail(result, 6000))  # the report's table: each check and its figures
    assert result.returncode == 0, tail(result)
    report = json.loads(report_path.read_text())
    assert report["machine"]["cuda_available"] is True
    assert report["summary"]["failed"] == report["summary"]["error"] == 0
    assert report["bench"]["status"] == "passed"
    passed = {check["name"] for check in report["checks"] if check["status"] == "passed"}
    assert "test_gpu::test_mixed_precision_pays_on_64px_images" in passed
    assert "test_gpu::test_resume_on_cuda_is_bitwise_exact[0]" in passed
