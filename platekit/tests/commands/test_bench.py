"""make bench: the project's loop timed as train runs it, the data path alone, and each setting
that can speed it up tried against the current ones, advised only when faster in every round."""

import math
import re
import statistics
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from support import CONFIG_DIR, compose_config, module, read_json

bench = module("bench")
UserError = module("_errors").UserError
check_config = module("config._check").check
cores = module("config._threads").available_cores()
module("train")  # registers the run_dir resolver hydra.run.dir of train.yaml uses

# A few steps a run: enough to run every code path, too few for figures to bet on.
QUICK = [
    "bench.steps=4",
    "bench.warmup=1",
    "bench.rounds=2",
    "bench.data_batches=3",
    "trainer.accelerator=cpu",
]
VERDICTS = {"faster", "slower", "no clear difference"}


def run_bench(run_dir: Path, caplog: pytest.LogCaptureFixture, *overrides: str) -> dict:
    """bench's results on ``overrides``, checked to be actionable."""
    caplog.set_level("INFO")
    results = bench.bench(compose_config(run_dir, [*QUICK, *overrides], "bench"))
    assert read_json(run_dir / "bench.json") == results
    assert_actionable(results, caplog, [o for o in overrides if not o.startswith("bench.")])
    return results


def assert_actionable(
    results: dict, caplog: pytest.LogCaptureFixture, overrides: list[str]
) -> None:
    """Each setting tried is one a training run of the same overrides takes as it is, with its
    measured speed in the table; the advice is exactly the settings faster in every round."""
    for entry in results["tried"]:
        accepted = check_config(CONFIG_DIR, "train", [*overrides, entry["override"]])
        assert accepted.problems == [], entry
        assert entry["verdict"] in VERDICTS
        assert len(entry["ratios"]) == results["setup"]["rounds"] == 2
        assert all(math.isfinite(r) and r > 0 for r in entry["ratios"])
        assert entry["ratio"] == pytest.approx(statistics.median(entry["ratios"]))
        faster = min(entry["ratios"]) > 1 and entry["ratio"] >= bench.ADVISE_AT
        assert (entry["verdict"] == "faster") == faster
        assert re.search(rf"{re.escape(entry['override'])} +{entry['ratio']:.2f}x", caplog.text)
    advice = [entry for entry in results["tried"] if entry["verdict"] == "faster"]
    assert results["advice"] == advice
    for entry in advice:
        assert f"advice: {entry['override']}: {entry['ratio']:.2f}x {entry['per']}" in caplog.text
    if not advice:
        assert "advice: keep the current settings" in caplog.text


@pytest.mark.slow
def test_bench_times_the_loop_and_tries_each_setting_on_digits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    results = run_bench(tmp_path, caplog)
    setup, step, data = results["setup"], results["step"], results["data"]
    assert (setup["model"], setup["batch_size"], setup["num_workers"]) == ("SmallCNN", 64, 0)
    assert setup["precision"] == "32-true"
    assert step["runs"] == 2
    assert step["steps_per_s"] > 0
    assert step["samples_per_s"] == pytest.approx(64 * step["steps_per_s"])
    assert data["verdict"] in {"data-bound", "compute-bound"}
    assert data["batches_per_s"] > 0
    expected = ["data.batch_size=128"]
    expected += [f"data.num_workers={min(2, cores - 1)}"] if cores > 1 else []
    expected += ["trainer.precision=bf16-mixed"] + ([f"threads={cores}"] if cores > 1 else [])
    assert [entry["override"] for entry in results["tried"]] == expected
    assert results["tried"][0]["per"] == "samples/s"  # a larger batch: more samples a step
    assert results["memory"]["peak_mb"] > 0
    assert not list(tmp_path.rglob("*.ckpt"))  # no checkpoint file is part of a timed run


@pytest.mark.slow
def test_bench_tries_the_settings_of_a_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    results = run_bench(
        tmp_path, caplog, "data=diabetes", "model=mlp", f"paths.data_dir={tmp_path}"
    )
    assert results["setup"]["model"] == "MLP"
    batch = compose_config(tmp_path, ["data=diabetes"]).data.batch_size
    assert results["tried"][0]["override"] == f"data.batch_size={2 * batch}"


@pytest.mark.slow
def test_bench_says_data_bound_when_decoding_dominates_and_caching_is_faster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Images decoded in the training process every step (no workers, no cache) under a small
    MLP: decoding 32 PNGs takes most of each step, and decoding once at setup is far faster.
    (A 16-unit MLP: decoding is 56-75 % of a step even on a box loaded 3x over, against 40-48 %
    with the default 256-128 one, under which a loaded CI run failed this test once.)"""
    root = module("testing").write_image_folder(tmp_path / "images", classes=4, per_class=48)
    results = run_bench(
        tmp_path / "run", caplog, "data=image_folder", "model=mlp", f"data.root={root}",
        "model.net.hidden=[16]", "data.image_size=32", "data.channels=3", "data.num_workers=0",
        "data.cache_decoded=false", "data.batch_size=32", "bench.data_batches=12",
    )  # fmt: skip
    assert results["data"]["verdict"] == "data-bound", results["data"]
    assert results["data"]["data_share"] > 0.35, results["data"]  # data-bound from 0.25
    [cache] = [entry for entry in results["tried"] if entry["override"].startswith("data.cache")]
    assert cache["override"] == "data.cache_decoded=true"
    assert cache["verdict"] == "faster", cache  # several times faster: decoding is the step


def test_data_verdict_says_data_bound_from_the_share_of_a_step() -> None:
    # No workers: a step makes its batch, then computes. Batches made at 100/s under a loop of
    # 60 steps/s: 60 % of each step is the data's.
    serial = bench.data_verdict(100.0, 60.0, workers=0, cores=2)
    assert serial["verdict"] == "data-bound"
    assert serial["data_share"] == pytest.approx(0.6)
    fast = bench.data_verdict(1200.0, 120.0, workers=0, cores=2)
    assert (fast["verdict"], fast["data_share"]) == ("compute-bound", pytest.approx(0.1))
    # Two workers on two cores, measured at 200 batches/s: training keeps one core, so while
    # it trains they make 100 batches/s, under 1.25 batches a step of a 120 steps/s loop.
    shared = bench.data_verdict(200.0, 120.0, workers=2, cores=2)
    assert shared["batches_per_s"] == pytest.approx(100.0)
    assert shared["verdict"] == "data-bound"
    assert bench.data_verdict(200.0, 120.0, workers=2, cores=8)["verdict"] == "compute-bound"
    # One core: the workers have none to spare; the batch is made in turn with the step.
    alone = bench.data_verdict(100.0, 60.0, workers=2, cores=1)
    assert (alone["verdict"], alone["data_share"]) == ("data-bound", pytest.approx(0.6))


def test_a_setting_is_advised_only_when_faster_in_every_round() -> None:
    trial = bench.Trial("data.num_workers=1", "steps/s")
    assert bench.judged(trial, [1.8, 1.7, 1.9])["verdict"] == "faster"
    assert bench.judged(trial, [1.8, 0.99, 1.9])["verdict"] == "no clear difference"
    assert bench.judged(trial, [1.02, 1.03, 1.04])["verdict"] == "no clear difference"
    assert bench.judged(trial, [0.5, 0.6, 0.7])["verdict"] == "slower"
    assert bench.judged(trial, [1.8, 1.7, 1.9])["ratio"] == pytest.approx(1.8)


def test_a_tried_setting_keeps_its_type(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [], "bench")
    assert bench.with_override(cfg, "data.batch_size=128").data.batch_size == 128
    assert bench.with_override(cfg, "threads=2").threads == 2
    precision = bench.with_override(cfg, "trainer.precision=bf16-mixed").trainer.precision
    assert precision == "bf16-mixed"
    assert cfg.data.batch_size == 64  # the current settings are left as they were
    assert OmegaConf.is_struct(bench.with_override(cfg, "threads=2"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("bench.steps=0", "bench.steps=0 must be >= 1; raise it"),
        ("bench.rounds=0", "bench.rounds=0 must be >= 1; raise it"),
    ],
)
def test_bad_bench_option_is_one_clear_error(tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        bench.bench(compose_config(tmp_path, [*QUICK, override], "bench"))
