"""A class name is refused from source alone: no module runs to be refused.

The resolver reads source files to find the one class a name stands for. Text that looks like
a class statement (in a docstring, a string, an indented block) is not one; a class of a
private module is reached only through the ``__init__`` that exports it; a class whose bases,
read from source, are not the slot's kind is refused before its module is imported. Each
hostile module below writes a marker file when it runs: the marker stays absent.
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from platekit.testing import run_cli

from support import PACKAGE, cli_env, module, one_error_line, project_module, with_checkpoint

UserError = module("_errors").UserError
registry = module("_registry")
save_checkpoint = module("checkpoints._io").save_checkpoint

RUNS = "import os, pathlib\nif os.environ.get('IMPORT_MARKER'):\n    pathlib.Path(os.environ['IMPORT_MARKER']).write_text('ran')\nfrom torch import nn\n"  # noqa: E501

# file stem -> source after the marker code, with {name} the class a checkpoint names
ATTACKS = {
    "docstring": '"""Notes.\n\nclass {name}(nn.Module):\n    pass\n"""\n',
    "string": 'EXAMPLE = """\nclass {name}(nn.Module):\n    pass\n"""\n',
    "indented": "if False:\n    class {name}(nn.Module):\n        pass\n",
    "wrong_base": "class {name}(dict):\n    pass\n",
    "_private": "class {name}(nn.Module):\n    pass\n",
}


@pytest.fixture
def hostile_names() -> Iterator[dict[str, str]]:
    """The attacks as modules of the project's own ``models`` package, removed after; the
    class name each defines (or seems to), unique to this test process."""
    folder = Path(project_module("models").__file__).parent
    names = {attack: f"Hostile{attack.title().replace('_', '')}{os.getpid()}" for attack in ATTACKS}
    files = [folder / f"{attack}_{os.getpid()}_names_test.py" for attack in ATTACKS]
    for file, (attack, source) in zip(files, ATTACKS.items(), strict=True):
        file.write_text(RUNS + source.replace("{name}", names[attack]))
    try:
        yield names
    finally:
        for file in files:
            file.unlink()
        registry.top_level_classes.cache_clear()
        registry.parsed.cache_clear()


def naming(good: Path, net: str, path: Path) -> Path:
    content = torch.load(good, weights_only=True)
    content["hyper_parameters"]["net"] = {"_target_": net}
    save_checkpoint(content, path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attack", "entry"),
    [*((attack, "eval") for attack in ATTACKS), ("docstring", "train"), ("string", "export"),
     ("wrong_base", "predict"), ("_private", "train")],
)  # fmt: skip
def test_a_name_is_refused_without_running_its_module(
    trained: dict[str, Any], hostile_names: dict[str, str], tmp_path: Path, attack: str, entry: str
) -> None:
    name = f"{PACKAGE}.models.{hostile_names[attack]}"
    path = naming(Path(trained["metrics"]["best_checkpoint"]), name, tmp_path / "named.ckpt")
    marker = tmp_path / "marker"
    env = cli_env(IMPORT_MARKER=str(marker))
    result = run_cli(entry, *with_checkpoint(entry, path, tmp_path), cwd=tmp_path, env=env)
    one_error_line(result, name, "refused")
    assert not marker.exists(), f"{attack}: the module ran to be refused"


def private_torch_classes() -> list[str]:
    """``torch.nn.<Class>`` for each class defined only in a private module under torch.nn."""
    folder = Path(torch.nn.__file__).parent
    public: set[str] = set()
    private: set[str] = set()
    for file in folder.rglob("*.py"):
        parts = file.relative_to(folder).parts
        hidden = any(p.startswith("_") and p != "__init__.py" for p in parts)
        (private if hidden else public).update(registry.top_level_classes(file))
    return sorted(f"torch.nn.{name}" for name in private - public if not name.startswith("_"))


def test_a_short_name_reaches_no_private_module() -> None:
    names = private_torch_classes()
    assert len(names) >= 10, names  # the classes an attacker reached before
    before = set(sys.modules)
    for name in names:
        for slot in ("net", "part", "optimizer"):
            with pytest.raises(UserError, match="refused"):
                registry.active().resolve(name, slot)
    assert set(sys.modules) == before


def test_a_class_of_another_kind_is_refused_before_its_module_loads() -> None:
    """platekit's own classes in the wrong slot: their modules (optuna's, the server's) stay
    unloaded; each case runs in a fresh interpreter."""
    script = (
        "import sys\n"
        f"import {PACKAGE}\n"
        "from platekit._registry import active\n"
        "from platekit._errors import UserError\n"
        "for name, slot, heavy in [\n"
        "    ('platekit.sweeps.PruneBadTrials', 'net', 'optuna'),\n"
        "    ('platekit.sweeps.PruneBadTrials', 'optimizer', 'optuna'),\n"
        "    ('platekit.data.CsvDataModule', 'net', 'platekit.data._csv'),\n"
        "    ('platekit.models.Cosine', 'net', 'platekit.models._schedules'),\n"
        "]:\n"
        "    try:\n"
        "        active().resolve(name, slot)\n"
        "    except UserError as error:\n"
        "        print('refused' if 'without importing' in str(error) else 'late', heavy in sys.modules)\n"  # noqa: E501
        "    else:\n"
        "        print('accepted')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env()
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["refused False"] * 4, result.stdout
