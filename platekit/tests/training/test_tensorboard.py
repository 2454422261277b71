"""`make tensorboard`: serves the runs' TensorBoard logs, or says how to write some."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support import QUICK, ROOT, run_cli

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make_tensorboard(log_dir: Path, stamp: Path) -> list[str]:
    """The make command, with this interpreter's environment standing in for .venv."""
    stamp.touch()
    return [
        "make", "--no-print-directory", "-C", str(ROOT), "tensorboard", f"LOGDIR={log_dir}",
        "PORT=0", f"BIN={Path(sys.executable).parent}", f"STAMP={stamp}",
    ]  # fmt: skip


@pytest.mark.bake  # make's targets need the bake's requirements.lock
def test_without_logs_it_says_how_to_get_them(tmp_path: Path) -> None:
    result = subprocess.run(
        make_tensorboard(tmp_path, tmp_path / "stamp"), capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "train with: make train ARGS=logger=tensorboard" in result.stdout


@pytest.mark.slow
@pytest.mark.bake  # make's targets need the bake's requirements.lock
def test_serves_the_logs_of_a_tensorboard_run(tmp_path: Path) -> None:
    trained = run_cli("train", *QUICK, "trainer.max_epochs=1", "logger=tensorboard", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-2000:]
    command = make_tensorboard(tmp_path / "outputs", tmp_path / "stamp")
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as server:
        try:
            lines = []
            for line in server.stdout:
                lines.append(line)
                if "http://" in line:
                    break
            assert any(line.startswith("TensorBoard ") for line in lines), lines
        finally:
            os.killpg(server.pid, signal.SIGTERM)  # make and the tensorboard it started
