"""A run's wall time counts from its process's start, not from the recipe's first line."""

import subprocess
import sys
import time

import pytest

from support import module

clock = module("runtime.clock")


def test_process_clock_counts_the_time_before_platekit_was_imported() -> None:
    script = (
        "import time; time.sleep(1.0)\n"
        "from platekit.runtime import clock\n"
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
