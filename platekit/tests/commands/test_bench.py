"""The benchmark runs the real loop and the plain loop and reports every figure."""

import math
import re
from pathlib import Path

import pytest

from support import compose_config, module, read_json

bench = module("bench")
UserError = module("_errors").UserError

# A few steps of each section: enough to run every code path, too few for useful figures.
TINY = [
    "bench.steps=3",
    "bench.warmup=1",
    "bench.repeats=1",
    "bench.max_pairs=1",
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
    # One round (bench.max_pairs=1): too few pairs to bound the median, so no verdict.
    assert results["loop"]["pairs"] == 1
    assert results["loop"]["over_bare_interval"] is None
    assert results["loop"]["over_bare_verdict"] == "inconclusive"
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
    report = module("commands._bench_report")
    loop = {
        "over_bare_ratio": 0.991,
        "over_bare_interval": [0.975, 1.004],
        "over_bare_verdict": "met",
        "pairs": 9,
        "target_over_bare": 0.97,
    }
    assert report.target_verdict(loop) == (
        "0.991 (interval 0.975-1.004 over 9 pairs; target >= 0.97: met)"
    )
    straddles = {**loop, "over_bare_interval": [0.950, 1.010], "over_bare_verdict": "inconclusive"}
    assert report.target_verdict(straddles).endswith(
        "target >= 0.97: inconclusive: the interval holds the target; run on a quieter "
        "machine or raise bench.max_pairs)"
    )
    # Too few pairs for an interval: the verdict does not speak of one.
    few = {**loop, "over_bare_interval": None, "over_bare_verdict": "inconclusive", "pairs": 4}
    assert report.target_verdict(few) == (
        "0.991 (4 pairs, too few for an interval (6 or more give one); target >= 0.97: "
        "inconclusive: no interval to judge by; raise bench.max_pairs to 6 or more)"
    )
    assert report.overhead(23.4, "over bare Lightning") == "23 us/step over bare Lightning"
    negative = report.overhead(-1453.0, "over the plain loop")
    assert negative.startswith("not measurable (-1453 us/step over the plain loop: the machine")


def test_median_interval_bounds_the_median_from_six_pairs_on() -> None:
    stats = module("commands._bench_stats")
    assert stats.median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)
    assert stats.median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)
    # n=9: P(Binomial(9, 1/2) < 2) = 10/512, twice that under 5 %: the 2nd and 8th values.
    assert stats.median_interval([float(v) for v in range(1, 10)]) == (2.0, 8.0)
    # n=20: the 6th and 15th (2 * P(X < 6) = 4.1 %; 2 * P(X < 7) = 11.5 %).
    assert stats.median_interval([float(v) for v in range(1, 21)]) == (6.0, 15.0)


def test_paired_ratio_says_met_missed_or_inconclusive() -> None:
    ratio = module("commands._bench_stats").PairedRatio.of
    assert ratio([0.98, 0.99, 1.0, 1.01, 0.985, 0.995], 0.97).verdict == "met"
    assert ratio([0.90, 0.91, 0.92, 0.93, 0.94, 0.95], 0.97).verdict == "missed"
    assert ratio([0.89, 0.95, 0.97, 0.99, 1.02, 1.07], 0.97).verdict == "inconclusive"
    few = ratio([1.05, 1.06, 1.07], 0.97)  # all above, but 3 pairs bound no median
    assert few.verdict == "inconclusive"
    assert few.interval() == "no interval from 3 pairs (6 or more give one)"


def test_a_plain_loop_slower_than_bare_lightning_is_explained() -> None:
    report = module("commands._bench_report")
    assert report.plain_loop_note({"bare_ratio": 0.87, "bare_ratio_interval": [0.85, 0.9]}) == []
    noisy = report.plain_loop_note({"bare_ratio": 1.04, "bare_ratio_interval": [0.96, 1.1]})
    assert "within the noise of this machine" in noisy[0]
    real = report.plain_loop_note({"bare_ratio": 1.2, "bare_ratio_interval": [1.1, 1.3]})
    assert "beyond noise: the plain loop is not the fastest loop on this setup" in real[0]


def test_time_to_first_step_has_a_verdict() -> None:
    report = module("commands._bench_report")
    startup = {
        "parts": {"imports": 2.0},
        "seconds": 4.26,
        "import_lightning_seconds": 1.5,
        "above_import_lightning_seconds": 2.76,
        "target_above_s": 1.5,
    }
    rows = report.startup_rows(startup)
    assert " ".join(rows[-1].split()) == "above import lightning 2.76 s (target <= 1.5 s: missed)"
    met = report.startup_rows({**startup, "above_import_lightning_seconds": 1.2})
    assert met[-1].endswith("(target <= 1.5 s: met)")


def test_data_verdict_can_say_data_bound_and_names_what_helps() -> None:
    helps = ["data.cache_decoded=true (decode each sample once, at setup)"]
    # No workers: a step makes its batch, then computes. Decoding at 100 batches/s under a
    # model that computes 120 steps/s alone: 55 % of each step is the data's.
    serial = bench.data_verdict(100.0, 120.0, workers=0, cores=2, helps=helps)
    assert serial["verdict"] == "data-bound"
    assert serial["data_share"] == pytest.approx(120 / 220)
    assert serial["helps"] == helps
    # The data path alone 10x faster than the model: its share is small, nothing to try.
    fast = bench.data_verdict(1200.0, 120.0, workers=0, cores=2, helps=helps)
    assert (fast["verdict"], fast["helps"]) == ("compute-bound", [])
    assert fast["data_share"] == pytest.approx(120 / 1320)
    # Two workers on two cores, measured at 200 batches/s: training keeps one core, so
    # while it trains they deliver 100 batches/s, under the model's 120.
    shared = bench.data_verdict(200.0, 120.0, workers=2, cores=2, helps=helps)
    assert shared["batches_per_s"] == pytest.approx(100.0)
    assert shared["verdict"] == "data-bound"
    assert bench.data_verdict(200.0, 120.0, workers=2, cores=8)["verdict"] == "compute-bound"


@pytest.mark.slow
def test_bench_says_data_bound_when_decoding_dominates_and_names_the_cache(
    tmp_path: Path,
) -> None:
    """Images decoded in the training process every step (no workers, no cache) under a
    small MLP: decoding 32 PNGs takes more of each step than the model does."""
    root = module("testing").write_image_folder(tmp_path / "images", classes=4, per_class=48)
    overrides = [
        "data=image_folder", "model=mlp", f"data.root={root}", "data.image_size=32",
        "data.channels=3", "data.num_workers=0", "data.cache_decoded=false", "data.batch_size=32",
        "bench.data_batches=12", "bench.steps=8",
    ]  # fmt: skip
    results = bench.bench(compose_config(tmp_path / "run", [*TINY, *overrides], "bench"))
    data = results["data"]
    assert data["verdict"] == "data-bound", data
    assert data["data_share"] > 0.35, data  # the verdict says data-bound from 0.25
    assert data["helps"][0].startswith("data.cache_decoded=true")


def test_a_bench_yaml_written_before_max_pairs_gets_the_default() -> None:
    from omegaconf import OmegaConf

    older = OmegaConf.create({"steps": 200, "warmup": 10, "repeats": 5, "data_batches": 200,
                              "boundary_epochs": 8, "startup_runs": 3, "command_runs": 1,
                              "clock": "wall"})  # fmt: skip
    OmegaConf.set_struct(older, True)  # as Hydra hands it over
    bench.check_options(older)  # no KeyError
    assert bench.max_pairs(older) == bench.DEFAULT_MAX_PAIRS == 20
