"""The GPU tier: every promise of the project, checked on CUDA. Skipped without a CUDA device.

``make gpu-check`` runs it (and the bench) and writes ``gpu_report.json``; alone, run
``pytest -m gpu -s`` to see the figures it prints. Each test records its figures with
``record_property``, which the report collects from pytest's JUnit XML.
"""

import csv
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from platekit.data import ImageFolderDataModule
from platekit.testing import (
    CrashError,
    cli_env,
    compose_config,
    crash_after,
    data_verdict,
    differing_tensors,
    free_port,
    loss_logging,
    project_module,
    read_json,
    run_cli,
    shipped_model,
    step_losses,
    write_image_folder,
)
from platekit.testing import benchmark_loops as loops
from platekit.training import build_parts

from conftest import PACKAGE, ROOT

CORES = len(os.sched_getaffinity(0))  # the data verdict's cores: this process's

Record = Callable[[str, object], None]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason=f"no CUDA device visible (torch {torch.__version__}, "
        f"{'CPU-only build' if torch.version.cuda is None else 'CUDA ' + torch.version.cuda})",
    ),
]

ON_GPU = ["trainer=gpu", "callbacks.progress_bar=null", "trainer.max_epochs=5", "logger=csv"]


def train_on_gpu(run_dir: Path, *overrides: str) -> dict[str, Any]:
    """Train on CUDA; print steps/s and peak memory; return the metrics (with both added)."""
    torch.cuda.reset_peak_memory_stats()
    metrics = project_module("train").train(compose_config(run_dir, [*ON_GPU, *overrides]))
    metrics["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    metrics["steps_per_s"] = metrics["steps_per_second"]  # training time only (training/_speed.py)
    print(
        f"\n[gpu] {torch.cuda.get_device_name()} {metrics['precision']}: "
        f"{metrics['steps_per_s']:.0f} steps/s, peak memory {metrics['peak_mb']:.1f} MiB, "
        f"test accuracy {metrics['test']['test/acc']:.4f}"
    )
    return metrics


def record_all(record: Record, prefix: str, figures: dict[str, Any]) -> None:
    """Record each figure as ``prefix.name`` (the gpu-check report reads them)."""
    for name, value in figures.items():
        record(
            f"{prefix}.{name}" if prefix else name,
            round(value, 4) if isinstance(value, float) else value,
        )


def final_train_loss(run_dir: Path) -> float:
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        return [float(r["train/loss"]) for r in csv.DictReader(handle) if r["train/loss"]][-1]


def test_bf16_mixed_smoke_training(tmp_path: Path, record_property: Record) -> None:
    if not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip(f"{torch.cuda.get_device_name()} has no native bfloat16")
    metrics = train_on_gpu(tmp_path, "trainer.precision=bf16-mixed")
    record_all(record_property, "", {k: metrics[k] for k in ("steps_per_s", "peak_mb")})
    record_property("test_acc", metrics["test"]["test/acc"])
    assert metrics["precision"] == "bf16-mixed"
    assert metrics["test"]["test/acc"] > 0.9


def test_auto_precision_agrees_with_fp32(tmp_path: Path, record_property: Record) -> None:
    amp = train_on_gpu(tmp_path / "amp", "trainer.precision=auto")
    fp32 = train_on_gpu(tmp_path / "fp32", "trainer.precision=32-true")
    assert amp["precision"] in ("bf16-mixed", "16-mixed")
    assert fp32["precision"] == "32-true"
    loss_amp, loss_fp32 = final_train_loss(tmp_path / "amp"), final_train_loss(tmp_path / "fp32")
    print(f"[gpu] final train loss: {amp['precision']} {loss_amp:.4f}, 32-true {loss_fp32:.4f}")
    record_all(
        record_property,
        "",
        {"auto": amp["precision"], "loss_auto": loss_amp, "loss_fp32": loss_fp32},
    )
    assert loss_amp == pytest.approx(loss_fp32, abs=0.05, rel=0.25)
    assert amp["test"]["test/acc"] == pytest.approx(fp32["test"]["test/acc"], abs=0.03)


# ---- mixed precision pays ------------------------------------------------------------------

IMAGES = 64  # side of the generated RGB images: large enough for the GPU to matter
WIDE_CNN = ["model.net.channels=[64,128]", "data.batch_size=128"]
SPEEDUP_TARGET = 1.3  # mixed over 32-true steps/s: a benchmark figure, printed, not asserted


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 classes x 256 RGB PNGs, 64x64, written once for the tests that need real images."""
    return write_image_folder(
        tmp_path_factory.mktemp("images"), classes=4, per_class=256, size=IMAGES
    )


def image_overrides(root: Path, *extra: str) -> list[str]:
    return [
        "data=image_folder",
        f"data.root={root}",
        f"data.image_size={IMAGES}",
        "data.channels=3",
        *WIDE_CNN,
        *extra,
    ]


def mixed_precision() -> str:
    return "bf16-mixed" if torch.cuda.is_bf16_supported(including_emulation=False) else "16-mixed"


def test_mixed_precision_pays_on_64px_images(
    image_root: Path, tmp_path: Path, record_property: Record
) -> None:
    """Steps/s and peak memory of the project loop in 32-true and mixed precision, timed
    without validation (the bench's loop); then both train 3 epochs and agree in loss."""
    from lightning.pytorch import seed_everything

    mixed = mixed_precision()
    # Decoded once, in memory on the GPU: the comparison is of compute, not of decoding.
    overrides = image_overrides(image_root, "data.cache_decoded=true", "data.num_workers=0")
    cfg = compose_config(tmp_path / "timed", [*ON_GPU, *overrides])
    figures: dict[str, Any] = {}
    with loops.quiet_lightning():
        for precision in ("32-true", mixed):
            seed_everything(0, verbose=False)
            datamodule, model, _ = build_parts(cfg)
            torch.cuda.reset_peak_memory_stats()
            timer, _ = loops.timed_fit(
                cfg, model, datamodule, steps=100, warmup=10, precision=precision
            )
            figures[f"{precision}.steps_per_s"] = timer.rate
            figures[f"{precision}.peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    speedup = figures[f"{mixed}.steps_per_s"] / figures["32-true.steps_per_s"]
    losses = {}
    for precision in ("32-true", mixed):
        run_dir = tmp_path / precision
        train_on_gpu(run_dir, *overrides, "trainer.max_epochs=3", f"trainer.precision={precision}")
        losses[precision] = final_train_loss(run_dir)
    figures |= {"mixed": mixed, "speedup": speedup, "speedup_target": SPEEDUP_TARGET}
    figures |= {"meets_target": speedup >= SPEEDUP_TARGET}
    figures |= {f"{name}.final_loss": loss for name, loss in losses.items()}
    record_all(record_property, "", figures)
    print(
        f"[gpu] {IMAGES}x{IMAGES} RGB, CNN [64, 128], batch 128: 32-true "
        f"{figures['32-true.steps_per_s']:.0f} steps/s {figures['32-true.peak_mb']:.0f} MiB; "
        f"{mixed} {figures[f'{mixed}.steps_per_s']:.0f} steps/s "
        f"{figures[f'{mixed}.peak_mb']:.0f} MiB; speedup {speedup:.2f}x "
        f"(target {SPEEDUP_TARGET}x); final loss {losses}"
    )
    assert all(math.isfinite(loss) for loss in losses.values())
    assert losses[mixed] == pytest.approx(losses["32-true"], abs=0.1, rel=0.3)


# ---- exact resume on CUDA -------------------------------------------------------------------

RESUME = [
    "trainer=gpu",
    "trainer.deterministic=true",
    "trainer.max_epochs=3",
    "callbacks.progress_bar=null",
    "callbacks.early_stopping=null",
    "callbacks.model_checkpoint.last_every_n_steps=10",
    "logger=csv",
]
NO_DETERMINISTIC_KERNEL = "does not have a deterministic implementation"


def train_deterministic(run_dir: Path, *overrides: str) -> None:
    """Train; an op with no deterministic CUDA kernel fails the test naming the op."""
    cfg = compose_config(run_dir, [*RESUME, *loss_logging(run_dir / "losses.txt"), *overrides])
    try:
        project_module("train").train(cfg)
    except RuntimeError as error:
        if NO_DETERMINISTIC_KERNEL not in str(error):
            raise
        op = str(error).split(NO_DETERMINISTIC_KERNEL)[0].strip()
        pytest.fail(
            f"{op} has no deterministic CUDA kernel: exact resume on CUDA needs it replaced"
        )


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_on_cuda_is_bitwise_exact(
    tmp_path: Path, workers: int, record_property: Record
) -> None:
    loader = f"data.num_workers={workers}"
    train_deterministic(tmp_path / "whole", loader)
    resumed = tmp_path / "resumed"
    with pytest.raises(CrashError):
        train_deterministic(resumed, loader, *crash_after(35))
    train_deterministic(resumed, loader, f"ckpt_path={resumed}/checkpoints/last.ckpt")
    differ = differing_tensors(resumed, tmp_path / "whole")
    losses = step_losses(tmp_path / "whole" / "losses.txt")
    record_all(record_property, "", {"differ": len(differ), "steps": len(losses)})
    assert not differ, f"resumed on CUDA differs from uninterrupted in {differ[:5]}"
    assert step_losses(resumed / "losses.txt") == losses


# ---- the GPU never waits on data ------------------------------------------------------------


def gpu_trainer(root: Path) -> Any:
    from lightning import Trainer

    return Trainer(accelerator="gpu", devices=1, logger=False, default_root_dir=root)


def test_in_memory_data_stays_on_the_gpu(tmp_path: Path, record_property: Record) -> None:
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup()
    datamodule.trainer = gpu_trainer(tmp_path)
    device = torch.device("cuda", torch.cuda.current_device())
    loader = datamodule.train_dataloader()
    assert loader.data.inputs.device.type == "cuda"  # moved once, not per step
    inputs, targets = next(iter(loader))
    assert inputs.device.type == targets.device.type == "cuda"
    seconds = loops.data_seconds(datamodule, device, 200)
    record_property("batches_per_s", round(200 / seconds, 1))


def test_dataloader_path_verdict_and_what_helps(
    image_root: Path, tmp_path: Path, record_property: Record
) -> None:
    """The image-folder DataLoader path (workers, pinned memory, non_blocking copies), with
    augmentation on: batches/s of each setting against the steps/s of the project's loop on
    batches decoded once and held in memory."""
    device = torch.device("cuda", torch.cuda.current_device())
    options = {
        "root": str(image_root), "image_size": IMAGES, "channels": 3, "batch_size": 128,
        "crop_padding": 4, "flip": True, "seed": 0,
    }  # fmt: skip
    cfg = compose_config(tmp_path / "model", [*ON_GPU, *image_overrides(image_root)])
    reference = ImageFolderDataModule(**options, num_workers=0, cache_decoded=True)
    _, model, _ = build_parts(cfg)
    with loops.quiet_lightning():
        timer, _ = loops.timed_fit(
            cfg, model, reference, steps=100, warmup=10, precision=mixed_precision()
        )
    model_rate = timer.rate
    settings = {
        "workers 0": {"num_workers": 0},
        "workers 2": {"num_workers": 2},
        "workers 4": {"num_workers": 4},
        "workers 2, cache_decoded": {"num_workers": 2, "cache_decoded": True},
        "workers 0, cache_decoded": {"num_workers": 0, "cache_decoded": True},
    }
    rows = {}
    for name, setting in settings.items():
        datamodule = ImageFolderDataModule(**options, **setting)
        datamodule.setup()
        datamodule.trainer = gpu_trainer(tmp_path)
        loader = datamodule.train_dataloader()
        assert loader.pin_memory  # host batches are pinned, so the copy can overlap compute
        batch = datamodule.transfer_batch_to_device(next(iter(loader)), device, 0)
        assert batch[0].device.type == "cuda"
        seconds = loops.data_seconds(datamodule, device, 40)
        workers = setting["num_workers"]
        rows[name] = data_verdict(40 / seconds, model_rate, workers=workers, cores=CORES)
        print(f"[gpu] data path {name}: {rows[name]['batches_per_s']:.1f} batches/s, "
              f"model {model_rate:.1f} steps/s: {rows[name]['verdict']}")  # fmt: skip
    for name, row in rows.items():
        record_property(f"{name}.batches_per_s", round(row["batches_per_s"], 1))
        record_property(f"{name}.verdict", row["verdict"])
    record_property("model_steps_per_s", round(model_rate, 1))
    assert all(row["batches_per_s"] > 0 for row in rows.values())


# ---- compile, export and predict from a CUDA-trained checkpoint -----------------------------


@pytest.fixture(scope="module")
def gpu_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The best checkpoint of a default run trained on CUDA (precision auto)."""
    metrics = train_on_gpu(tmp_path_factory.mktemp("gpu_run"), "trainer.max_epochs=4")
    return str(metrics["best_checkpoint"])


def test_compile_on_cuda_trains_and_its_checkpoint_loads_without_compile(
    tmp_path: Path, record_property: Record
) -> None:
    metrics = train_on_gpu(tmp_path, "compile=true", "trainer.max_epochs=3")
    record_all(record_property, "", {k: metrics[k] for k in ("steps_per_s", "peak_mb")})
    assert metrics["test"]["test/acc"] > 0.9
    model = shipped_model(metrics["best_checkpoint"])  # plain, on CPU
    assert not any("_orig_mod" in key for key in model.state_dict())
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup("test")
    with torch.inference_mode():
        _, probabilities = model(datamodule.raw_inputs("test"))
    accuracy = float((probabilities.argmax(1) == datamodule.targets("test")).float().mean())
    record_property("uncompiled_cpu_acc", round(accuracy, 4))
    assert accuracy > 0.9


def test_export_of_a_cuda_checkpoint_passes_parity(
    gpu_checkpoint: str, tmp_path: Path, record_property: Record
) -> None:
    import onnxruntime

    cfg = compose_config(
        tmp_path, [f"ckpt_path={gpu_checkpoint}", "repeats=3"], config_name="export"
    )
    report = project_module("export").export(cfg)
    worst = max(row["max_abs_diff"] for row in report["parity"])
    record_property("cpu_ep.max_abs_diff", worst)
    assert all(row["classes_agree"] for row in report["parity"])
    assert worst < 1e-4
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        record_property("cuda_ep", "absent (onnxruntime without CUDA)")
        return
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup("test")
    raw = datamodule.raw_inputs("test").numpy()
    outputs = {}
    for provider in ("CPUExecutionProvider", "CUDAExecutionProvider"):
        session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=[provider])
        name = session.get_inputs()[0].name
        outputs[provider] = session.run(None, {name: raw})[-1]  # probabilities
    diff = float(np.abs(outputs["CPUExecutionProvider"] - outputs["CUDAExecutionProvider"]).max())
    record_property("cuda_ep.max_abs_diff", diff)
    assert diff < 1e-3  # TF32 convolutions on the GPU round a little differently


def test_predict_from_a_cuda_checkpoint_on_cuda_agrees_with_cpu(
    gpu_checkpoint: str, tmp_path: Path, record_property: Record
) -> None:
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup("test")
    raw = datamodule.raw_inputs("test")
    inputs = tmp_path / "test.npy"
    np.save(inputs, raw.numpy())
    cfg = compose_config(
        tmp_path, [f"model_path={gpu_checkpoint}", f"inputs={inputs}"], config_name="predict"
    )
    rows = project_module("predict").predict(cfg)  # PyTorch on the CPU, as predict runs a .ckpt
    on_cpu = np.array([row["probability"] for row in rows])
    model = shipped_model(gpu_checkpoint).cuda()
    with torch.inference_mode():
        _, probabilities = model(raw.cuda())
    on_gpu = probabilities.max(1).values.cpu().numpy()
    classes = np.array([row["class"] for row in rows])
    agree = float(np.mean(classes == probabilities.argmax(1).cpu().numpy()))
    record_all(
        record_property,
        "",
        {"max_abs_diff": float(np.abs(on_cpu - on_gpu).max()), "classes_agree": agree},
    )
    assert agree == 1.0
    np.testing.assert_allclose(on_gpu, on_cpu, atol=1e-3)


# ---- DDP, torchrun, doctor ------------------------------------------------------------------


# 0 GPUs: the module's own skip (no CUDA device visible) gives the reason.
@pytest.mark.skipif(0 < torch.cuda.device_count() < 2, reason="DDP on GPUs needs 2 or more visible")
def test_ddp_on_all_visible_gpus(tmp_path: Path) -> None:
    # A subprocess: Lightning re-launches the running script for the other ranks.
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", "trainer=ddp", *ON_GPU[1:],
         f"paths.root_dir={tmp_path}"],
        cwd=ROOT, env=cli_env(),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    metrics = read_json(run_dir / "metrics.json")
    print(f"\n[gpu] ddp on {metrics['world_size']} GPUs: {metrics['fit_seconds']} s fit")
    assert metrics["world_size"] == torch.cuda.device_count()
    assert metrics["test"]["test/acc"] > 0.9


def test_torchrun_one_node_all_gpus(tmp_path: Path, record_property: Record) -> None:
    gpus = torch.cuda.device_count()
    env = cli_env(PYTHON=sys.executable, MASTER_PORT=str(free_port()), RUN_NAME="torchrun")
    result = subprocess.run(
        ["bash", "scripts/torchrun.sh", "1", str(gpus), *ON_GPU[1:], f"paths.root_dir={tmp_path}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_json(tmp_path / "outputs" / "train" / "runs" / "torchrun" / "metrics.json")
    record_all(
        record_property,
        "",
        {"world_size": metrics["world_size"], "fit_seconds": metrics["fit_seconds"]},
    )
    assert metrics["world_size"] == gpus
    assert metrics["test"]["test/acc"] > 0.9


def test_doctor_cuda_checks_pass(tmp_path: Path, record_property: Record) -> None:
    result = run_cli("doctor", "--json", cwd=tmp_path)
    checks = {check["name"]: check for check in json.loads(result.stdout)}
    wanted = ["backend nccl"]
    for index in range(torch.cuda.device_count()):
        wanted += [f"device cuda:{index}", f"precision cuda:{index}", f"deterministic cuda:{index}"]
    for name in wanted:
        record_property(name, f"{checks[name]['status']}: {checks[name]['detail']}")
    failed = {name: checks[name] for name in wanted if checks[name]["status"] != "ok"}
    assert not failed, failed
    assert (
        "bf16" in checks["precision cuda:0"]["detail"]
        or "fp16" in checks["precision cuda:0"]["detail"]
    )
