"""Time to first step: how long ``python -m <package>.train`` takes to run its first step.

A fresh process runs the stages of ``train.py`` one by one and stamps the clock after each;
it is compared with a process that only runs ``import lightning``, the floor for any
Lightning program. Run as a script, this module is that fresh process: it writes its
wall-clock and CPU-time stamps to ``<paths.output_dir>/stamps.json``. Nothing heavy is
imported at its top, so the imports are timed; Hydra's compose API stands in for
``hydra.main``, the rest is the code ``train.py`` calls.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from platekit._project import current

STAGES = ("imports", "config", "data_setup", "model_build", "first_step")


def measure_startup(overrides: list[str], runs: int, clock: str = "wall") -> dict[str, Any]:
    """The fastest of ``runs`` fresh processes, by stage, and the fastest bare import.

    The fastest run is the one least disturbed by other work on the machine. With
    ``clock="cpu"`` the processes' CPU time is counted instead of wall time.
    """
    stamps, floors = [], []
    with tempfile.TemporaryDirectory(prefix="first-step-") as workdir:
        for run in range(runs):
            stamps.append(_first_step_process(overrides, Path(workdir) / str(run), clock))
            floors.append(import_lightning_seconds(clock))
    parts = min(stamps, key=lambda stages: sum(stages.values()))
    total = sum(parts.values())
    floor = min(floors)
    return {
        "seconds": total,
        "parts": parts,
        "import_lightning_seconds": floor,
        "above_import_lightning_seconds": total - floor,
        "runs": runs,
    }


def _first_step_process(overrides: list[str], output_dir: Path, clock: str) -> dict[str, float]:
    """Seconds each stage took in one fresh process (imports include interpreter start)."""
    launched = time.time()
    result = subprocess.run(
        [
            sys.executable,
            __file__,
            current().package,
            f"paths.output_dir={output_dir}",
            *overrides,
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"time-to-first-step process failed:\n{result.stderr[-3000:]}")
    marks = json.loads((output_dir / "stamps.json").read_text())[clock]
    times = [launched if clock == "wall" else 0.0] + [marks[stage] for stage in STAGES]
    return {stage: end - start for stage, start, end in zip(STAGES, times, times[1:], strict=False)}


def import_lightning_seconds(clock: str) -> float:
    """Wall or CPU seconds from launch until ``import lightning`` is done, in a fresh process."""
    script = "import lightning, time; print(time.time(), time.process_time())"
    launched = time.time()
    result = subprocess.run(
        [sys.executable, "-c", script], env=child_env(), capture_output=True, text=True, check=True
    )
    wall, cpu = map(float, result.stdout.split()[-2:])
    return wall - launched if clock == "wall" else cpu


def child_env() -> dict[str, str]:
    paths = [str(current().root / "src"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _run_stages(package: str, overrides: list[str]) -> None:
    """Run the stages of ``train.train`` up to the end of the first step, stamping each."""
    from importlib import import_module

    import_module(f"{package}.train")  # everything `python -m <package>.train` imports
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from lightning import Callback

    from platekit._files import write_json
    from platekit.config._nodes import config_dir
    from platekit.data._adapters import data_info
    from platekit.models._tasks import task_of
    from platekit.training._trainer import build_trainer, model_for, prepare_run

    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def stamp(stage: str) -> None:
        wall[stage], cpu[stage] = time.time(), time.process_time()

    stamp("imports")

    class StopTimingError(Exception):
        """Raised after the first step: all that is timed has happened."""

    class FirstStep(Callback):
        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
            if pl_module.device.type == "cuda":
                torch.cuda.synchronize(pl_module.device)
            stamp("first_step")
            raise StopTimingError

    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        cfg = compose(config_name="train", overrides=overrides)
    prepare_run(cfg)
    stamp("config")
    datamodule = instantiate(cfg.data)
    info = data_info(datamodule)
    stamp("data_setup")
    model = model_for(cfg, datamodule, info)
    stamp("model_build")
    trainer = build_trainer(cfg, callbacks=[FirstStep()], task=task_of(model))
    with contextlib.suppress(StopTimingError):
        trainer.fit(model, datamodule=datamodule)
    write_json(Path(cfg.paths.output_dir) / "stamps.json", {"wall": wall, "cpu": cpu})


if __name__ == "__main__":
    _run_stages(sys.argv[1], sys.argv[2:])
