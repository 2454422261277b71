"""Bad checkpoints, unsafe payloads, non-finite losses: one clear error, nothing overwritten."""

import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from support import (
    QUICK,
    ROOT,
    compose_config,
    module,
    read_json,
    refuse_constant,
    run_cli,
)

train = module("train")
evaluate = module("eval")
export = module("export")
predict = module("predict")
checkpoints = module("checkpoints._io")
integrity = module("checkpoints._integrity")
UserError = module("_errors").UserError


class Payload:
    """Unpickling this runs code: a checkpoint carrying it must be refused."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned",))


class Reduce:
    """Unpickling calls ``function(*args)``."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.function, self.args)


def flip_bytes(good: Path, path: Path, tensor: torch.Tensor, count: int = 64) -> Path:
    """Copy ``good`` to ``path`` with ``count`` bytes inverted inside ``tensor``'s storage."""
    data = bytearray(good.read_bytes())
    start = data.find(tensor.numpy().tobytes())
    assert start > 0, "the tensor's bytes are not stored verbatim in the file"
    for index in range(start, start + count):
        data[index] ^= 0xFF
    path.write_bytes(data)
    return path


def bad_checkpoint(kind: str, good: Path, folder: Path) -> tuple[Path, str]:
    """A broken checkpoint of ``kind`` and the words its error must contain."""
    path = folder / f"{kind}.ckpt"
    if kind == "truncated":
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path, "is not a readable PyTorch checkpoint"
    if kind == "random":
        path.write_bytes(os.urandom(4096))
        return path, "is not a readable PyTorch checkpoint"
    if kind == "empty":
        path.write_bytes(b"")
        return path, "is not a readable PyTorch checkpoint"
    if kind == "pickled_code":
        torch.save({"state_dict": {}, "payload": Payload()}, path)
        return path, "refused for safety"
    if kind == "directory":
        path.mkdir()
        return path, "is a directory, not a checkpoint file"
    if kind == "symlink_loop":
        path.symlink_to(path.name)  # relative: points at itself
        return path, "is a symbolic link loop"
    checkpoint = torch.load(good, weights_only=True)
    if kind == "plain_state_dict":
        torch.save(checkpoint["state_dict"], path)
        return path, "has no 'state_dict'"
    if kind == "flipped":
        flip_bytes(good, path, checkpoint["state_dict"][HEAD])
        return path, "is corrupt: checksum mismatch"
    if kind == "non_finite":
        checkpoint["state_dict"][HEAD][3, 5] = float("nan")
        checkpoints.save_checkpoint(checkpoint, path)  # a valid checksum: only the NaN is wrong
        return path, f"weight '{HEAD}' holds NaN/Inf \\(1 of 640 values\\)"
    if kind == "reshaped":
        checkpoint["state_dict"][HEAD] = checkpoint["state_dict"][HEAD].reshape(64, 10)
        checkpoints.save_checkpoint(checkpoint, path)
        return path, "does not fit this model's architecture"
    if kind == "other_architecture":
        checkpoint["state_dict"] = {"net.layers.0.weight": torch.zeros(3, 3)}
        checkpoints.save_checkpoint(checkpoint, path)
        return path, "does not fit this model's architecture"
    return folder / "missing.ckpt", "does not exist"


HEAD = "net.head.1.weight"  # the default CNN's last layer, (10, 64)
KINDS = [
    "truncated",
    "random",
    "empty",
    "pickled_code",
    "directory",
    "symlink_loop",
    "plain_state_dict",
    "flipped",
    "non_finite",
    "reshaped",
    "other_architecture",
    "missing",
]
# Refused on load, whatever the model: every entry point gets the same line.
LOAD_KINDS = [k for k in KINDS if k not in ("reshaped", "other_architecture")]
# What train meets beyond load_checkpoint's path checks (eval meets those): its two loads
# (ckpt_path, init_from) and its architecture check.
TRAIN_KINDS = [k for k in KINDS if k not in ("empty", "directory", "symlink_loop")]


# The load refusals are each met fast by eval below; train's own ones stay in the fast tier.
TRAIN_FAST = ("truncated", "pickled_code", "other_architecture", "reshaped", "missing")


@pytest.mark.parametrize(
    "kind",
    [k if k in TRAIN_FAST else pytest.param(k, marks=pytest.mark.slow) for k in TRAIN_KINDS],
)
def test_train_refuses_a_bad_checkpoint_before_writing(
    kind: str, trained: dict[str, Any], tmp_path: Path
) -> None:
    path, reason = bad_checkpoint(kind, trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path)
    before = path.read_bytes() if path.is_file() else None
    run_dir = tmp_path / "run"
    for setting in ("ckpt_path", "init_from"):
        with pytest.raises(UserError, match=f"checkpoint '{path}'.*{reason}"):
            train.train(compose_config(run_dir, [*QUICK, f"{setting}={path}"]))
    assert not run_dir.exists()  # nothing written
    assert (path.read_bytes() if path.is_file() else None) == before


# eval meets every kind; export and predict (the same load_checkpoint) the newer ones.
ENTRY_KINDS = [
    *(("eval", kind) for kind in LOAD_KINDS),
    *((entry, kind) for entry in ("export", "predict") for kind in ("flipped", "non_finite")),
]


@pytest.mark.parametrize(("entry", "kind"), ENTRY_KINDS)
def test_eval_export_predict_refuse_a_bad_checkpoint(
    entry: str, kind: str, trained: dict[str, Any], tmp_path: Path
) -> None:
    path, reason = bad_checkpoint(kind, trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path)
    setting = "model_path" if entry == "predict" else "ckpt_path"
    overrides = [f"{setting}={path}", f"inputs={tmp_path / 'x.npy'}"] if entry == "predict" else []
    cfg = compose_config(tmp_path / "run", overrides or [f"{setting}={path}"], entry)
    run = {"eval": evaluate.evaluate, "export": export.export, "predict": predict.predict}[entry]
    with pytest.raises(UserError, match=f"checkpoint '{path}'.*{reason}") as error:
        run(cfg)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_pickled_code_is_never_run(trained: dict[str, Any], tmp_path: Path) -> None:
    path, _ = bad_checkpoint("pickled_code", trained["run_dir"] / "last.ckpt", tmp_path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)  # what load_checkpoint relies on


@pytest.mark.parametrize(
    ("payload", "name"),
    [
        ("os.system", f"{os.system.__module__}.system"),  # posix.system on Linux
        ("builtins.eval", "builtins.eval"),
        ("subprocess.Popen", "subprocess.Popen"),
        ("builtins.exec", "builtins.exec"),
    ],
)
def test_malicious_pickles_are_refused_unrun_naming_the_global(
    payload: str, name: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    action = {
        "os.system": Reduce(os.system, f"touch {marker}"),
        "builtins.eval": Reduce(eval, f"open({str(marker)!r}, 'w')"),
        "subprocess.Popen": Reduce(subprocess.Popen, ["touch", str(marker)]),
        "builtins.exec": Reduce(exec, f"open({str(marker)!r}, 'w')"),
    }[payload]
    path = tmp_path / "malicious.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": {"x": action}}, path)
    with pytest.raises(UserError) as error:
        checkpoints.load_checkpoint(path)
    message = str(error.value)
    assert not marker.exists()
    assert f"holds code or objects a checkpoint must not hold (pickled global '{name}')" in message
    assert "nothing in it ran" in message
    assert "weights_only" not in message  # never advise turning the safe loader off
    assert "\n" not in message


def test_torch_load_misses_a_flipped_weight_the_checksum_catches(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    good = trained["run_dir"] / "checkpoints" / "last.ckpt"
    path, _ = bad_checkpoint("flipped", good, tmp_path)
    flipped = torch.load(path, weights_only=True)["state_dict"][HEAD]  # torch.load: no error
    assert not torch.equal(flipped, torch.load(good, weights_only=True)["state_dict"][HEAD])
    with pytest.raises(UserError, match=r"is corrupt: checksum mismatch \(stored sha256:\w+"):
        checkpoints.load_checkpoint(path)


def test_checksum_covers_the_optimizer_state(trained: dict[str, Any], tmp_path: Path) -> None:
    good = trained["run_dir"] / "checkpoints" / "last.ckpt"
    state = torch.load(good, weights_only=True)["optimizer_states"][0]["state"]
    exp_avg = max((s["exp_avg"] for s in state.values()), key=torch.Tensor.numel)
    path = flip_bytes(good, tmp_path / "optimizer.ckpt", exp_avg)
    with pytest.raises(UserError, match="is corrupt: checksum mismatch"):
        checkpoints.load_checkpoint(path)


def test_every_checkpoint_a_run_writes_carries_a_checksum_that_verifies(
    trained: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    paths = sorted((trained["run_dir"] / "checkpoints").glob("*.ckpt"))
    assert len(paths) >= 2  # best and last
    for path in paths:
        stored = torch.load(path, weights_only=True)[integrity.CHECKSUM_KEY]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", stored)
        checkpoint = checkpoints.load_checkpoint(path)
        assert integrity.CHECKSUM_KEY not in checkpoint  # checked and removed
    assert "checksum" not in caplog.text


def test_a_checkpoint_without_checksum_loads_with_one_warning(
    trained: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = torch.load(trained["run_dir"] / "checkpoints" / "last.ckpt", weights_only=True)
    del checkpoint[integrity.CHECKSUM_KEY]
    path = tmp_path / "other_tool.ckpt"
    torch.save(checkpoint, path)
    for _ in range(2):  # resume opens it twice: still one warning
        loaded = checkpoints.load_checkpoint(path)
    assert torch.equal(loaded["state_dict"][HEAD], checkpoint["state_dict"][HEAD])
    warnings = [r for r in caplog.records if "no content checksum" in r.getMessage()]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()


def test_an_edited_checkpoint_verifies_once_resaved_by_the_project(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    checkpoint = torch.load(trained["run_dir"] / "checkpoints" / "last.ckpt", weights_only=True)
    checkpoint["hyper_parameters"]["note"] = "edited"
    torch.save(checkpoint, tmp_path / "stale.ckpt")  # the old checksum no longer fits
    with pytest.raises(UserError, match=r"checksum mismatch .*re-save it with checkpoints.io"):
        checkpoints.load_checkpoint(tmp_path / "stale.ckpt")
    checkpoints.save_checkpoint(checkpoint, tmp_path / "resaved.ckpt")
    loaded = checkpoints.load_checkpoint(tmp_path / "resaved.ckpt")
    assert loaded["hyper_parameters"]["note"] == "edited"


def test_a_checkpoint_without_checksum_is_still_refused_for_nan(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    checkpoint = torch.load(trained["run_dir"] / "checkpoints" / "last.ckpt", weights_only=True)
    del checkpoint[integrity.CHECKSUM_KEY]
    checkpoint["state_dict"]["net.features.0.1.running_var"][0] = float("inf")
    torch.save(checkpoint, tmp_path / "inf.ckpt")
    with pytest.raises(UserError, match=r"weight 'net.features.0.1.running_var' holds NaN/Inf"):
        checkpoints.load_checkpoint(tmp_path / "inf.ckpt")


def load_as_unprivileged(path: Path) -> str:
    """The UserError message of load_checkpoint(path) for a user without root's rights.

    As root (who may read any file) it runs in a forked child switched to uid/gid 65534.
    """
    if os.geteuid() != 0:
        with pytest.raises(UserError) as error:
            checkpoints.load_checkpoint(path)
        return str(error.value)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        message = "loaded without error"
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            checkpoints.load_checkpoint(path)
        except UserError as error:
            message = str(error)
        except BaseException as error:
            message = f"unexpected {error!r}"
        finally:
            os.write(write_end, message.encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(child, 0)
    return message


NOBODY = 65534


def test_an_unreadable_checkpoint_names_the_permission_problem(trained: dict[str, Any]) -> None:
    # Under the system temp folder, not tmp_path: pytest keeps its folders private to root.
    folder = Path(tempfile.mkdtemp(prefix="unreadable-"))
    try:
        folder.chmod(0o755)
        path = folder / "private.ckpt"
        shutil.copyfile(trained["run_dir"] / "checkpoints" / "last.ckpt", path)
        path.chmod(0o000)
        message = load_as_unprivileged(path)
        assert f"checkpoint '{path}' cannot be read: no read permission (mode ---------" in message
        assert "corrupt" not in message
        if os.geteuid() == 0:  # a folder on the way that others may not enter
            path.chmod(0o644)
            folder.chmod(0o700)
            assert "permission denied on a folder of its path" in load_as_unprivileged(path)
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_json_files_are_strict_json(tmp_path: Path) -> None:
    files = module("_files")
    files.write_json(tmp_path / "m.json", {"loss": math.nan, "curve": [1.5, math.inf, -math.inf]})
    assert read_json(tmp_path / "m.json") == {"loss": None, "curve": [1.5, None, None]}
    with pytest.raises(ValueError, match="NaN is not JSON"):
        read_json_text('{"x": NaN}')  # what a strict parser does with Python's default


def read_json_text(text: str) -> Any:
    import json

    return json.loads(text, parse_constant=refuse_constant)


def test_every_json_a_run_writes_is_strict(
    trained: dict[str, Any], exported: dict[str, Any], tmp_path: Path
) -> None:
    written = [*trained["run_dir"].rglob("*.json"), *exported["dir"].rglob("*.json")]
    overrides = [f"ckpt_path={exported['ckpt']}", "trainer.accelerator=cpu"]
    evaluate.evaluate(compose_config(tmp_path, overrides, "eval"))
    written.append(tmp_path / "metrics.json")
    names = {p.name for p in written}
    assert {"metrics.json", "export.json"} <= names
    for path in written:
        read_json(path)  # bench.json: test_bench.py reads it the same way


def test_init_from_strict_and_not(trained: dict[str, Any], tmp_path: Path) -> None:
    model = module("training._trainer").build_parts(compose_config(tmp_path, ["model=mlp"]))[1]
    cnn_checkpoint = checkpoints.load_checkpoint(trained["run_dir"] / "checkpoints" / "last.ckpt")
    with pytest.raises(UserError, match=r"missing: net.*unexpected: net.*init_strict=false"):
        checkpoints.load_weights(model, cnn_checkpoint, "cnn.ckpt")
    unfit = checkpoints.load_weights(model, cnn_checkpoint, "cnn.ckpt", strict=False)
    assert unfit["missing"]
    assert unfit["unexpected"]
    same = module("training._trainer").build_parts(compose_config(tmp_path, []))[1]
    assert checkpoints.load_weights(same, cnn_checkpoint, "cnn.ckpt") == {
        "missing": [],
        "unexpected": [],
        "mismatched": [],
    }
    for key, tensor in cnn_checkpoint["state_dict"].items():
        assert torch.equal(same.state_dict()[key], tensor)


@pytest.mark.slow
def test_init_from_not_strict_trains_and_lists_the_keys_left_out(
    trained: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cnn = trained["run_dir"] / "checkpoints" / "last.ckpt"
    overrides = ["model=mlp", "debug=fast_dev_run", "callbacks.progress_bar=null"]
    cfg = compose_config(tmp_path, [*overrides, f"init_from={cnn}", "init_strict=false"])
    assert train.train(cfg)["steps"] == 1
    assert "init_from: 6 missing keys left as initialised: ['net.layers" in caplog.text
    assert "unexpected keys left as initialised: ['net." in caplog.text


def test_non_finite_loss_stops_with_step_batch_and_hint(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        [*QUICK, "optimizer.lr=1e30", "trainer.max_epochs=1"],
    )
    with pytest.raises(
        UserError,
        match=r"training loss is (nan|inf) at step \d+ \(epoch 0, batch \d+\); lower optimizer\.",
    ):
        train.train(cfg)


def test_sampler_resume_state_after_a_whole_epoch_starts_the_next() -> None:
    sampler = module("data._sampling").EpochBatchSampler(100, 16, shuffle=True, seed=0)
    sampler.load_state_dict({"epoch": 2, "skip": len(sampler)})
    assert sampler.state_dict() == {"epoch": 3, "skip": 0}
    sampler.mark_consumed(3)
    assert sampler.state_dict() == {"epoch": 3, "skip": 3}
    sampler.set_epoch(4)
    assert sampler.state_dict() == {"epoch": 4, "skip": 0}


def test_rng_states_round_trip_as_tensors(tmp_path: Path) -> None:
    import random

    import numpy as np

    rng = module("checkpoints._rng")
    state = rng.capture_rng()
    torch.save(state, tmp_path / "rng.pt")
    first = (torch.rand(3), np.random.rand(3), random.random())
    rng.restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(first[0], again[0])
    assert (first[1] == again[1]).all()
    assert first[2] == again[2]


def test_ckpt_path_last_picks_the_newest_and_its_run_dir(tmp_path: Path) -> None:
    resume = module("config._resume")
    runs = tmp_path / "outputs" / "train" / "runs"
    for name in ("a", "b"):
        (runs / name / "checkpoints").mkdir(parents=True)
        torch.save({"state_dict": {}}, runs / name / "checkpoints" / "last.ckpt")
    os.utime(runs / "a" / "checkpoints" / "last.ckpt", (1, 1))
    assert resume.find_last_checkpoint(runs) == runs / "b" / "checkpoints" / "last.ckpt"
    assert resume.run_dir("last", str(runs / "new")) == str(runs / "b")
    assert resume.run_dir(None, str(runs / "new")) == str(runs / "new")
    assert resume.run_dir(str(runs / "a/checkpoints/last.ckpt"), "new") == str(runs / "a")
    (runs / "a" / "checkpoints" / "cut.ckpt").write_bytes(b"PK")  # truncated: a fresh run
    assert resume.run_dir(str(runs / "a/checkpoints/cut.ckpt"), "new") == "new"
    with pytest.raises(UserError, match="ckpt_path=last found no"):
        resume.resume_path(
            compose_config(tmp_path, ["ckpt_path=last", f"paths.log_dir={tmp_path}"])
        )


@pytest.mark.slow
def test_cli_bad_checkpoint_is_one_line_without_traceback(
    trained: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, reason = bad_checkpoint(
        "truncated", trained["run_dir"] / "checkpoints" / "last.ckpt", tmp_path
    )
    result = run_cli("train", f"ckpt_path={path}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: checkpoint '{path}' {reason}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    monkeypatch.setenv("TRACEBACK", "1")  # the debug flag
    result = run_cli("train", f"ckpt_path={path}", cwd=tmp_path)
    assert "Traceback" in result.stderr


def test_a_full_disk_names_the_file_and_keeps_the_previous_one(tmp_path: Path) -> None:
    # /dev/full fails every write with ENOSPC: a real full-disk error from the kernel, for a
    # writer that streams its data there. The slow test below fills a real (tmpfs) disk.
    files = module("_files")
    path = tmp_path / "metrics.json"
    path.write_text("previous\n")

    def write(tmp: Path) -> None:
        with open("/dev/full", "wb", buffering=0) as full:
            full.write(b"x" * 5000)

    with pytest.raises(UserError) as error:
        files.write_atomic(path, write, size=5000)
    message = str(error.value)
    assert message.startswith(f"cannot write '{path}': no space left on its disk (needs about ")
    assert re.search(r"needs about 4\.9 KiB, [\d.]+ [KMG]?i?B free\)", message)
    assert path.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no temporary left


# Run as root in a new user and mount namespace: a 64 KiB tmpfs that really fills up. A
# checkpoint fills it mid-stream, where torch's C++ writer swallows the OSError of `write`.
FULL_DISK_SCRIPT = """
import sys
from pathlib import Path
import torch
io = __import__(sys.argv[1] + ".checkpoints._io", fromlist=["io"])
files = __import__(sys.argv[1] + "._files", fromlist=["files"])
disk = Path(sys.argv[2])
io.save_checkpoint({"state_dict": {"w": torch.ones(4)}}, disk / "last.ckpt")
before = (disk / "last.ckpt").read_bytes()
big = {"state_dict": {"w": torch.ones(40_000)}}
for name, write in (
    ("last.ckpt", lambda: io.save_checkpoint(big, disk / "last.ckpt")),
    ("metrics.json", lambda: files.write_json(disk / "metrics.json", {"x": list(range(30_000))})),
):
    try:
        write()
        print("written", name)
    except Exception as error:
        print(type(error).__name__, error)
print("previous intact", (disk / "last.ckpt").read_bytes() == before)
print("files", sorted(p.name for p in disk.iterdir()))
try:  # full from the start
    with open(disk / "filler", "wb") as filler:
        filler.write(bytes(1 << 20))
except OSError:
    pass
try:
    files.write_json(disk / "config.json", {"seed": 0})
except Exception as error:
    print(type(error).__name__, error)
"""


@pytest.mark.slow
def test_a_really_full_disk_stops_checkpoint_and_json_writes_cleanly(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = f"mount -t tmpfs -o size=64k tmpfs {disk}"
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("no user namespaces to mount a small tmpfs in (the /dev/full test ran)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    command = f'{mount} && exec "$0" -c "$1" "$2" "$3"'
    args = [sys.executable, FULL_DISK_SCRIPT, "platekit", str(disk)]
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    checkpoint_line = f"UserError cannot write '{disk / 'last.ckpt'}': no space left on its disk"
    assert lines[0].startswith(checkpoint_line + " (needs about 156.2 KiB, "), lines
    json_line = f"UserError cannot write '{disk / 'metrics.json'}': no space left on its disk"
    assert lines[1].startswith(json_line), lines
    assert lines[2:4] == ["previous intact True", "files ['last.ckpt']"]
    assert lines[4] == (
        f"UserError cannot write '{disk / 'config.json'}': no space left on its disk (needs "
        "about 16 B, 0 B free); any previous file is left as it was. Free some space, or write "
        "elsewhere (e.g. paths.output_dir=...)"
    )
