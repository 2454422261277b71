"""The thread count of a run: chosen from the setting, the environment and the cores."""

import logging
import os
from typing import Any

import pytest
import torch

from support import module

threads = module("config._threads")
UserError = module("_errors").UserError


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
    assert threads.choose_threads("auto", accelerator="gpu").count == max(1, cores // 2)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert threads.choose_threads("auto", devices=1, accelerator="gpu").count == cores


def test_auto_on_the_cpu_is_one_thread_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured on 2 cores: the default model at 50.4 steps/s with one, 16.8 with two."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    chosen = threads.choose_threads("auto", accelerator="cpu")
    assert (chosen.count, chosen.reason) == (
        1,
        "auto: 1 per process on CPU, where more cost more than they give",
    )


def test_a_resume_keeps_its_count_and_an_explicit_other_one_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with caplog.at_level(logging.WARNING):
        kept = threads.choose_threads("auto", accelerator="cpu", resumed=3)
    assert (kept.count, kept.reason) == (3, "auto: the resumed run's 3")
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        assert threads.choose_threads(2, resumed=3).count == 2
    assert "no longer bitwise equal" in caplog.text


def test_every_checkpoint_stores_its_thread_count(trained: dict[str, Any]) -> None:
    checkpoint = torch.load(trained["metrics"]["best_checkpoint"], weights_only=True)
    assert checkpoint[threads.CHECKPOINT_KEY] == torch.get_num_threads()


@pytest.mark.parametrize("bad", [0, -1, "many", 1.5, True])
def test_other_settings_are_refused(bad: object) -> None:
    with pytest.raises(UserError, match=r"^threads=.*must be auto or a whole number >= 1"):
        threads.choose_threads(bad)
