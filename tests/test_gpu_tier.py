"""The baked project's GPU tier, run where a CUDA device is visible."""

from pathlib import Path

import pytest
import torch

from conftest import python_in, tail


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")
def test_baked_gpu_tier_passes(default_project: Path) -> None:
    result = python_in(
        default_project, "-m", "pytest", "-q", "-s", "-rs", "-p", "no:cacheprovider", "-m", "gpu"
    )
    print(tail(result, 6000))  # the steps/s and peak memory the tier prints
    assert result.returncode == 0, tail(result)
    assert " passed" in result.stdout
    assert "[gpu]" in result.stdout
