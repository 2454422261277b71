"""A checkpoint or a setting shaped to break the code that reads it gets one line, never a
traceback: nesting thousands of levels deep or containing itself, a base class named as the
data module or the task, a setting of the wrong type on resume, a number no int64 holds, a
net too large for the memory this process may use.
"""

import copy
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from support import PACKAGE, cli_env, module, one_error_line, run_cli, with_checkpoint

save_checkpoint = module("checkpoints._io").save_checkpoint
CHECKSUM_KEY = module("checkpoints._integrity").CHECKSUM_KEY


def nested(depth: int, kind: type) -> Any:
    node: Any = kind()
    top = node
    for _ in range(depth):
        child = kind()
        if isinstance(node, dict):
            node["x"] = child
        else:
            node.append(child)
        node = child
    return top


def cyclic_list() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def cyclic_dict() -> dict[str, Any]:
    loop: dict[str, Any] = {"a": {}}
    loop["a"]["back"] = loop
    return loop


# name -> (where in the checkpoint, what is put there, sealed, the refusal's words)
SHAPES = {
    "deep_dict": ("net", lambda: nested(5000, dict), False, "more than 64 levels deep"),
    "deep_list": ("net", lambda: nested(200, list), False, "more than 64 levels deep"),
    "cyclic_list": ("net", cyclic_list, False, "a container inside itself"),
    "cyclic_dict": ("top", cyclic_dict, False, "a container inside itself"),
    "base_data_module": ("data", lambda: "platekit.data.BaseDataModule", True, "base class"),
    "base_task": ("task", lambda: "platekit.models.Task", True, "base class"),
    # eval: "cannot rebuild its model"; a train resume: "cannot be built from its settings"
    "string_dropout": ("dropout", lambda: "0.5", True, "cannot"),
    "string_channels": ("channels", lambda: "wide", True, "cannot"),
}


def shaped(good: Path, shape: str, path: Path) -> Path:
    """A copy of ``good`` with the hostile ``shape`` put in; sealed or saved plainly."""
    where, make, sealed, _ = SHAPES[shape]
    content = copy.deepcopy(torch.load(good, weights_only=True))
    value = make()
    hparams = content["hyper_parameters"]
    if where == "net":
        hparams["net"]["extra"] = value
    elif where == "top":
        content["extra"] = value
    elif where == "data":
        content["data"]["_target_"] = value
    elif where == "task":
        hparams["task"] = {"_target_": value}
    else:
        hparams["net"][where] = value
    if sealed:
        save_checkpoint(content, path)
    else:  # torch.save itself recurses: a writer of its own raises the limit
        content.pop(CHECKSUM_KEY, None)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            torch.save(content, path)
        finally:
            sys.setrecursionlimit(limit)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "entry"),
    [*((shape, "eval") for shape in SHAPES), ("deep_dict", "train"), ("deep_dict", "export"),
     ("cyclic_list", "predict"), ("base_data_module", "train"), ("string_dropout", "train"),
     ("string_channels", "train")],
)  # fmt: skip
def test_a_hostile_checkpoint_shape_is_one_line(
    trained: dict[str, Any], tmp_path: Path, shape: str, entry: str
) -> None:
    path = shaped(Path(trained["metrics"]["best_checkpoint"]), shape, tmp_path / "shaped.ckpt")
    result = run_cli(entry, *with_checkpoint(entry, path, tmp_path), cwd=tmp_path)
    assert SHAPES[shape][3] in one_error_line(result)


def capped(cap_bytes: int) -> Any:
    """A ``preexec_fn`` that caps the child's address space at ``cap_bytes``."""
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("model.net.channels=[20000,20000]", ("holds 7,200,620,013 values", "RLIMIT_AS")),
        ("model.net.channels=[5000,5000]", ("values: training it needs", "RLIMIT_AS")),
        ("model=mlp model.net.hidden=[100000,100000]", ("values: training it needs",)),
        ("data.batch_size=100000000000000000000", ("beyond any number",)),
        ("seed=-99999999999999999999", ("beyond any number",)),
        ("model.net.channels=[100000000000000000000]", ("beyond any number",)),
    ],
)
def test_a_setting_too_large_for_this_process_is_one_line(
    tmp_path: Path, override: str, words: tuple[str, ...]
) -> None:
    """Each under a 3 GiB address-space cap the test sets: the refusal takes no memory."""
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", *override.split(), "trainer.max_epochs=1",
         "callbacks.progress_bar=null"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
        preexec_fn=capped(3 * 2**30),
    )  # fmt: skip
    one_error_line(result, *words)
    assert "MemoryError" not in result.stdout + result.stderr
