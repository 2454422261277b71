"""Times a user sees: a run's wall time counts from its process's start; a wrong value is
refused before anything is written."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import PACKAGE, cli_env, module, run_cli

clock = module("training._clock")


def test_process_clock_counts_the_time_before_platekit_was_imported() -> None:
    script = (
        "import time; time.sleep(1.0)\n"
        "from platekit.training import _clock as clock\n"
        "first, second = clock.run_origin(), clock.run_origin()\n"
        "print(clock.seconds_since_process_start(), clock.process_clock_source(),"
        " time.perf_counter() - first, time.perf_counter() - second)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    age, source, first_run, later_run = result.stdout.replace("s s", "s_s").split()
    assert source == "process_start"  # the kernel's figure (Linux)
    assert 1.0 <= float(age) < 30
    assert float(first_run) >= 1.0  # the first run in a process counts from its start
    assert float(later_run) < 0.5  # a later one (a sweep's next trial) from its own start


@pytest.mark.parametrize("kernel_age", [None, 0.0])  # no /proc; one that reads inconsistently
def test_without_a_usable_kernel_figure_the_clock_counts_from_platekit_import(
    monkeypatch: pytest.MonkeyPatch, kernel_age: float | None
) -> None:
    monkeypatch.setattr(clock, "_kernel_process_age", lambda: kernel_age)
    assert clock.process_clock_source() == "platekit import"
    since_import = time.perf_counter() - clock._IMPORTED
    assert clock.seconds_since_process_start() == pytest.approx(since_import, abs=0.05)


def test_a_wrong_value_is_refused_before_the_run_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", "trainer.max_epochs=abc", "seed=-5"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "error: config has 2 problems:",  # in config order
        "  seed=-5: must be an integer from 0 to 4294967295 (e.g. seed=0)",
        "  trainer.max_epochs=abc: must be null or an integer >= -1 (e.g. trainer.max_epochs=15)",
    ]
    assert result.stderr == ""
    assert not (tmp_path / "outputs").exists()


def test_with_a_component_setting_every_problem_is_still_listed_together(
    tmp_path: Path,
) -> None:
    result = run_cli("train", "seed=-5", "data.batch_size=0", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "error: config has 2 problems:",
        "  seed=-5: must be an integer from 0 to 4294967295 (e.g. seed=0)",
        "  data.batch_size=0: must be an integer >= 1 (e.g. data.batch_size=64)",
    ]
    assert not (tmp_path / "outputs").exists()
