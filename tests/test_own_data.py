"""The baked README's "Bring your own data and model" steps, followed literally.

Its code blocks that start with a ``# <path>`` comment are written to that path; its
``make train`` lines are run as they stand (with this environment's Python instead of
``.venv``): a CSV table, a folder of images, a data module subclass and a new model. Then
the bake's own tests take the new data module and model config with no new test code: the
data contract runs on configs/data/spirals.yaml, and the config test builds the new model.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import bake

pytestmark = pytest.mark.slow

SECTION = "## Bring your own data and model"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
# One epoch is enough to prove each path trains; the README's commands are kept intact.
SHORT = ["trainer.max_epochs=2", "callbacks.progress_bar=null", "logger=csv"]


def section(readme: str) -> str:
    start = readme.index(SECTION)
    end = readme.index("\n## ", start + len(SECTION))
    return readme[start:end]


def files_and_commands(text: str) -> tuple[dict[str, str], list[str]]:
    """Code blocks naming a path on their first line, and the ``make train`` lines."""
    files, commands = {}, []
    for _, body in FENCE.findall(text):
        first = body.splitlines()[0]
        if first.startswith("# ") and "/" in first and " " not in first[2:].strip():
            files[first[2:].strip()] = body
        commands += [line for line in body.splitlines() if line.startswith("make train ")]
    return files, commands


def run_make(project: Path, command: str, root: Path) -> subprocess.CompletedProcess:
    """A README ``make train ARGS="..."`` line, with $PWD the project and outputs under root."""
    line = command.replace("$PWD", str(project))
    args = re.fullmatch(r'make train ARGS="(.*)"', line)
    assert args, line
    overrides = " ".join([args.group(1), *SHORT, f"paths.root_dir={root}"])
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        ["make", "-o", ".venv/.installed", "train", f"BIN={Path(sys.executable).parent}",
         f"ARGS={overrides}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def write_table(path: Path) -> None:
    generator = np.random.default_rng(0)
    lines = ["width,height,weight,label"]
    for row in range(150):
        label = ("small", "medium", "large")[row % 3]
        size = (row % 3) + generator.normal(scale=0.3, size=3)
        lines.append(",".join(f"{v:.3f}" for v in size) + f",{label}")
    path.write_text("\n".join(lines) + "\n")


def write_images(root: Path) -> None:
    """28x28 grey PNGs of two classes: a bright square or a bright bar, on dark."""
    generator = np.random.default_rng(0)
    for name in ("square", "bar"):
        (root / name).mkdir(parents=True)
        for i in range(40):
            pixels = generator.uniform(0, 30, (28, 28))
            if name == "square":
                pixels[8:20, 8:20] += 200
            else:
                pixels[:, 12:16] += 200
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"{i}.png")


def test_readme_own_data_steps_run_as_written(tmp_path: Path) -> None:
    project = bake(tmp_path)
    files, commands = files_and_commands(section((project / "README.md").read_text()))
    package = next(p.name for p in (project / "src").iterdir() if (p / "__init__.py").is_file())
    assert {f"src/{package}/data/spirals.py", "configs/data/spirals.yaml"} <= files.keys()
    for path, body in files.items():
        (project / path).write_text(body)
    write_table(project / "table.csv")
    write_images(project / "images")
    # csv, image folder, sequences, the subclass, the model config
    assert len(commands) == 5, commands

    for number, command in enumerate(commands):
        root = tmp_path / f"run{number}"
        result = run_make(project, command, root)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        assert "test/acc" in result.stdout, command
        [run_dir] = (root / "outputs" / "train" / "runs").iterdir()
        assert (run_dir / "metrics.json").is_file()

    # The project's tests cover the new data module and model config as they stand.
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
         "tests/test_data_contract.py", "tests/test_configs.py", "-k", "spirals or wide_mlp", "-rA"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    passed = set(re.findall(r"^PASSED (\S+)", tests.stdout, re.MULTILINE))
    contract = {name for name in passed if "test_data_contract.py" in name}
    assert len(contract) == 7 and all("[spirals]" in name for name in contract), passed
    assert (
        "tests/test_configs.py::test_model_config_builds_for_the_data_it_takes[wide_mlp]" in passed
    )
    assert "tests/test_configs.py::test_option_composes_and_builds[data=spirals]" in passed
    skips = re.findall(r"^SKIPPED .*$", tests.stdout, re.MULTILINE)
    assert all("inputs of one size, nothing is padded" in line for line in skips), skips
