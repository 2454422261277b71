"""The benchmark runs the real loop and the plain loop and reports every figure."""

import math
import re
from pathlib import Path

import pytest

from support import compose_config, module, read_json

bench = module("bench")
UserError = module("cli.errors").UserError

# A few steps of each section: enough to run every code path, too few for useful figures.
TINY = [
    "bench.steps=3",
    "bench.warmup=1",
    "bench.repeats=1",
    "bench.data_batches=3",
    "bench.boundary_epochs=2",
    "bench.startup_runs=0",
    "bench.command_runs=0",
    "trainer.accelerator=cpu",
]


@pytest.mark.slow
def test_bench_reports_loop_data_and_memory_figures(tmp_path: Path) -> None:
    results = bench.bench(compose_config(tmp_path, TINY, "bench"))
    assert read_json(tmp_path / "bench.json") == results
    figures = [
        *(results["loop"][key] for key in ("plain_steps_per_s", "lightning_steps_per_s", "ratio")),
        results["data"]["batches_per_s"],
        results["memory"]["peak_mb"],
    ]
    assert all(math.isfinite(value) and value > 0 for value in figures), figures
    assert math.isfinite(results["loop"]["overhead_us_per_step"])
    assert results["data"]["verdict"] in {"data-bound", "compute-bound"}
    assert results["setup"]["model"] == "SmallCNN"
    assert results["first_step"] is None  # bench.startup_runs=0 skips it
    assert results["precision"] is None  # a CUDA-only section
    boundary = results["epoch_boundary"]
    assert boundary["epochs"] == 2
    assert boundary["steps_per_epoch"] == 20  # digits: 1258 train rows in batches of 64
    assert boundary["step_ms"] > 0
    assert boundary["boundary_ms"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("data", ["csv", "image_folder"])
def test_bench_runs_on_other_data_through_the_contract(tmp_path: Path, data: str) -> None:
    modules = module("data")
    fixture = {"csv": modules.CsvDataModule, "image_folder": modules.ImageFolderDataModule}
    settings = fixture[data].make_fixture(tmp_path)
    overrides = [f"data={data}", "model=mlp", *(f"data.{k}={v}" for k, v in settings.items())]
    results = bench.bench(compose_config(tmp_path / "run", [*TINY, *overrides], "bench"))
    assert results["setup"]["batch_size"] == settings["batch_size"]
    assert results["data"]["verdict"] in {"data-bound", "compute-bound"}
    assert results["data"]["batches_per_s"] > 0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("bench.steps=0", "bench.steps=0 must be >= 1"),
        ("bench.clock=sundial", "bench.clock=sundial is not a clock; use one of wall, cpu"),
        ("bench.startup_runs=-1", "bench.startup_runs=-1 must be >= 0"),
    ],
)
def test_bad_bench_option_is_one_clear_error(tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        bench.bench(compose_config(tmp_path, [*TINY, override], "bench"))


def test_bench_targets_have_verdicts_and_negative_overheads_are_explained() -> None:
    report = module("benchmarks.report")
    loop = {"over_bare_ratio": 0.981, "target_over_bare": 0.97}
    assert report.target_verdict(loop) == "0.981 (target >= 0.97: met)"
    assert report.target_verdict({**loop, "over_bare_ratio": 0.95}).endswith(": missed)")
    assert report.overhead(23.4, "over bare Lightning") == "23 us/step over bare Lightning"
    negative = report.overhead(-1453.0, "over the plain loop")
    assert negative.startswith("not measurable (-1453 us/step over the plain loop: the machine")
