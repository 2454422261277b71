"""What the tests share: the package under test, config composition, CLI runs.

The package is found from ``src/`` so no test file hard-codes its name.
"""

import json
import os
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from hydra import compose, initialize_config_dir
from lightning import Callback, LightningModule, Trainer
from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
PACKAGE = next(p.name for p in (ROOT / "src").iterdir() if (p / "__init__.py").is_file())


def module(name: str) -> ModuleType:
    """Import ``<package>.<name>``."""
    return import_module(f"{PACKAGE}.{name}")


def compose_config(
    output_dir: Path, overrides: list[str] | None = None, config_name: str = "train"
) -> DictConfig:
    """The config an entry point would see, with its run directory set to ``output_dir``."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIG_DIR)):
        return compose(
            config_name=config_name,
            overrides=[f"paths.output_dir={output_dir}", *(overrides or [])],
        )


# Small and quick, yet a real run: 3 epochs over the full data. The csv logger whatever the
# project's default, since tests read its metrics.csv (test_logger.py covers the default).
QUICK = [
    "trainer.max_epochs=3",
    "callbacks.progress_bar=null",
    "trainer.accelerator=cpu",
    "logger=csv",
]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment a CLI subprocess of the tests runs with (plus ``extra``)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "CONFIG_DIR": str(CONFIG_DIR),
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def start_cli(entry: str, *overrides: str, cwd: Path, **popen: Any) -> subprocess.Popen:
    """Start ``python -m <package>.<entry> overrides...`` from ``cwd``; output as text pipes."""
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.{entry}", *overrides],
        cwd=cwd,
        env=options.pop("env", cli_env()),
        text=True,
        **options,
    )


def run_cli(
    entry: str, *overrides: str, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``python -m <package>.<entry> overrides...`` in a subprocess from ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.{entry}", *overrides],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def read_json(path: Path) -> Any:
    """Parse ``path`` as strict JSON: NaN, Infinity and -Infinity are refused, as a strict
    parser (jq, browsers, most languages) refuses them."""
    return json.loads(path.read_text(), parse_constant=refuse_constant)


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


class StepLosses(Callback):
    """Append ``<global step> <loss as float.hex>`` to ``path`` after every training step.

    Add it to a run with ``+callbacks.losses._target_=support.StepLosses
    +callbacks.losses.path=<file>``; the file is appended to, so a resumed run continues it.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        with self.path.open("a") as handle:
            handle.write(f"{trainer.global_step} {float(outputs['loss']).hex()}\n")


def step_losses(path: Path) -> dict[int, str]:
    """Step -> loss from a StepLosses file; a step run twice (replayed after a kill) keeps
    its last value."""
    pairs = (line.split() for line in path.read_text().splitlines())
    return {int(step): loss for step, loss in pairs}


def loss_logging(path: Path) -> list[str]:
    """The overrides that add StepLosses writing to ``path``."""
    return ["+callbacks.losses._target_=support.StepLosses", f"+callbacks.losses.path={path}"]


def write_image_folder(
    root: Path, *, classes: int = 4, per_class: int = 64, size: int = 64
) -> Path:
    """Write ``classes`` folders of ``per_class`` RGB PNGs, ``size`` x ``size``, under ``root``.

    Class ``k`` is a bright square of a class colour at a random place on noise, so a CNN
    learns it in a few epochs, and the images are large enough for a GPU to matter.
    """
    import numpy as np
    from PIL import Image

    generator = np.random.default_rng(0)
    side = max(size // 4, 1)
    for label in range(classes):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True)
        colour = np.zeros(3)
        colour[label % 3] = 180.0
        colour[(label + label // 3) % 3] += 60.0 * (label // 3)
        for index in range(per_class):
            pixels = generator.uniform(0, 60, (size, size, 3))
            top, left = generator.integers(0, size - side + 1, 2)
            pixels[top : top + side, left : left + side] += colour
            image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
            image.save(folder / f"{index:04d}.png")
    return root


# A warning printed by Python's warnings module (Lightning's rank_zero_warn included):
# ``/path/to/file.py:123: message``. The project's own warnings go through logging.
WARNING_LINE = re.compile(r"\.py:\d+: |Warning: ")


def foreign_warnings(output: str) -> list[str]:
    """The lines of ``output`` that are warnings from outside the project's own logging."""
    return [line for line in output.splitlines() if WARNING_LINE.search(line)]
