"""The thread count of a run: chosen from the setting, the environment and the cores."""

import os

import pytest

from support import module

threads = module("runtime.threads")
UserError = module("cli.errors").UserError


def test_a_number_is_used_as_given() -> None:
    assert threads.choose_threads(3).count == 3


def test_auto_keeps_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    chosen = threads.choose_threads("auto")
    assert (chosen.count, str(chosen)) == (2, "2 (auto: OMP_NUM_THREADS=2)")


def test_auto_divides_the_cores_among_local_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    cores = len(os.sched_getaffinity(0))
    assert threads.choose_threads("auto").count == max(1, cores // 2)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert threads.choose_threads("auto", devices=1).count == cores


@pytest.mark.parametrize("bad", [0, -1, "many", 1.5, True])
def test_other_settings_are_refused(bad: object) -> None:
    with pytest.raises(UserError, match=r"^threads=.*must be auto or a whole number >= 1"):
        threads.choose_threads(bad)
