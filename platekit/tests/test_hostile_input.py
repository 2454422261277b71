"""Hostile input gets one line and a non-zero exit, never a silent wrong answer or a traceback.

Each test is one attack of the round's attack run: a card whose statistics would predict NaN,
arrays and images that overflow or hide NaN, a rotated JPEG, a huge picture in a small file,
an .npy header that lies, an object .npz, a run name that climbs out of outputs/, a stale
temporary left by a killed writer, a sweep storage that is not one, an over-long class name.
"""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from support import PACKAGE, ROOT, module, run_cli, run_python

UserError = module("_errors").UserError
Checkpoint = module("checkpoints._restore").Checkpoint
save_checkpoint = module("checkpoints._io").save_checkpoint
images = module("data._images")
inputs = module("data._inputs")
DataInfo = module("data._info").DataInfo

DIGITS = DataInfo(input_shape=(1, 8, 8), target_kind="class", class_names=tuple("0123456789"))


def edited(trained: dict[str, Any], tmp_path: Path, change: Any) -> Path:
    content = torch.load(trained["metrics"]["best_checkpoint"], weights_only=True)
    change(content)
    path = tmp_path / "edited.ckpt"
    save_checkpoint(content, path)  # sealed: the checksum cannot tell an edit
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["data"].__setitem__("mean", torch.tensor(float("nan"))), "mean holds NaN"),
        (lambda c: c["data"].__setitem__("std", torch.tensor(0.0)), "std holds values <= 0"),
        (lambda c: c["data"].__setitem__("std", torch.ones(3, 5)), "does not fit inputs"),
        (lambda c: c["data"]["info"].__setitem__("class_names", []), "one class name per output"),
        (lambda c: c["data"]["info"].__setitem__("input_shape", [1, -8]), "sizes >= 1"),
        (lambda c: c["data"]["info"].__setitem__("target_kind", "magic"), "not class or value"),
    ],
)
def test_a_card_that_would_predict_nonsense_is_refused(
    trained: dict[str, Any], tmp_path: Path, change: Any, message: str
) -> None:
    path = edited(trained, tmp_path, change)
    with pytest.raises(UserError, match=message):
        Checkpoint.open(path)


def test_float64_overflow_and_nan_images_are_refused(tmp_path: Path) -> None:
    huge = np.full((2, 1, 8, 8), 1e300)  # float64: inf once cast to float32
    with pytest.raises(UserError, match="row 0 holds NaN, Inf or a value beyond float32"):
        inputs.check_array(huge, (1, 8, 8), "x.npy")
    tiff = tmp_path / "nan.tiff"
    Image.fromarray(np.full((8, 8), np.nan, dtype=np.float32), mode="F").save(tiff)
    with pytest.raises(UserError, match="holds NaN or infinite pixel values"):
        inputs.read_inputs([tiff], DIGITS)


def test_exif_orientation_is_applied_in_the_one_decoder(tmp_path: Path) -> None:
    upright = np.zeros((8, 16), np.uint8)
    upright[:, :4] = 255  # a bright band on the left
    plain = tmp_path / "upright.png"
    Image.fromarray(upright).save(plain)
    # The same picture stored rotated, with EXIF orientation 6 (rotate 90 CW to view).
    stored = Image.fromarray(np.rot90(upright, k=1).copy())
    exif = stored.getexif()
    exif[0x0112] = 6
    rotated = tmp_path / "rotated.jpg"
    stored.save(rotated, exif=exif, quality=100)
    a = images.load_image(plain, 1, (8, 16))
    b = images.load_image(rotated, 1, (8, 16))
    assert np.abs(a - b).mean() < 0.05  # the same picture, upright in both


def test_a_huge_picture_in_a_small_file_is_refused_from_its_header(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    Image.new("L", (5000, 5000)).save(big)  # 25 M pixels, a few KB
    assert big.stat().st_size < 100_000
    with pytest.raises(UserError, match=r"over the limit of 16777216 \(max_image_pixels\)"):
        inputs.read_inputs([big], DIGITS)
    bomb = tmp_path / "bomb.png"
    Image.new("1", (20000, 20000)).save(bomb)  # over Pillow's own decompression-bomb limit
    with pytest.raises(UserError, match=r"too large to decode|over the limit"):
        inputs.read_inputs([bomb], DIGITS, max_pixels=None)


def test_garbage_after_a_png_signature_names_no_object(tmp_path: Path) -> None:
    body = io.BytesIO(b"\x89PNG\r\n\x1a\n" + b"garbage" * 20)
    body.name = "image body"
    with pytest.raises(UserError) as refusal:
        images.load_image(body, 1, (8, 8))
    assert "object at 0x" not in str(refusal.value)
    assert "'image body' is not a readable image" in str(refusal.value)


def test_lying_npy_headers_and_object_npz_are_one_line(tmp_path: Path) -> None:
    liar = tmp_path / "liar.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 40, 1, 8, 8)}
    with liar.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    with pytest.raises(UserError, match=r"header claims .* bytes but holds 64"):
        inputs.read_inputs([liar], DIGITS)
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(UserError, match=r"objects\.npz\[x\]' is not a plain numpy array file "):
        inputs.read_inputs([objects], DIGITS)  # its member's header, read before the member


def test_a_writer_removes_its_own_stale_temporaries(tmp_path: Path) -> None:
    files = module("_files")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    host = files.writer_tag().split("@", 1)[1]
    stale = tmp_path / f".model.onnx.{dead.stdout.strip()}@{host}.abc123.tmp"
    stale.write_text("left by a killed export")
    other = tmp_path / f".other.txt.{dead.stdout.strip()}@{host}.abc123.tmp"
    other.write_text("another file's: left alone")
    files.write_atomic(tmp_path / "model.onnx", lambda tmp: tmp.write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, "model.onnx"])


def test_an_unwritable_output_is_one_line() -> None:
    files = module("_files")
    with pytest.raises(UserError, match=r"cannot write '/proc/self/x/out\.csv'"):
        files.write_atomic(Path("/proc/self/x/out.csv"), lambda tmp: tmp.write_text("x"))


def test_an_over_long_class_name_is_cut_in_the_message() -> None:
    with pytest.raises(UserError) as refusal:
        module("_registry").active().resolve("a." * 500_000 + "B", "net")
    assert len(str(refusal.value)) < 400


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_sweep_storage_at_a_file_of_another_kind_is_refused_untouched(
    tmp_path: Path, kind: str
) -> None:
    storage = module("sweeps._storage")
    victim = tmp_path / "notes.txt"
    victim.write_text("my notes\n")
    setting = f"journal:{victim}" if kind == "journal" else f"sqlite:///{victim}"
    with pytest.raises(UserError, match="left untouched"):
        storage.open_storage(setting, tmp_path / "study", True)
    assert victim.read_text() == "my notes\n"


def test_two_sweeps_creating_one_study_at_once_both_work(tmp_path: Path) -> None:
    script = (
        "import sys, optuna\n"
        "from pathlib import Path\n"
        "from platekit.sweeps._storage import open_storage\n"
        "from platekit.commands._sweep import create_or_load\n"
        "from optuna.pruners import NopPruner\n"
        "optuna.logging.set_verbosity(optuna.logging.ERROR)\n"
        "storage = open_storage('sqlite', Path(sys.argv[1]), True)\n"
        "study = create_or_load('race', storage, 'maximize', NopPruner())\n"
        "print(study.study_name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    runs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err[-2000:]
        assert out.strip() == "race"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "../../../../x",
        "a/b",
        "..",
        "${oc.env:ESCAPE}",  # resolved by Hydra after the check: ESCAPE=../../../../art
        "x${oc.env:HOME}y",  # gave a traceback and left a folder
        "run\nerror: forged",  # a newline
        "tab\there",
    ],
)
@pytest.mark.parametrize("entry", ["train", "eval"])
def test_run_name_is_one_folder_name(tmp_path: Path, name: str, entry: str) -> None:
    env_name = {"RUN_NAME": name, "ESCAPE": "../../../../art"}
    (tmp_path / "work").mkdir()
    given = "trainer.max_epochs=1" if entry == "train" else "ckpt_path=missing.ckpt"
    result = run_python(
        ["-m", f"{PACKAGE}.{entry}", given],
        tmp_path / "work",
        {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env_name},
    )
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert line.startswith(f"error: RUN_NAME={module('_errors').inert(name)!r} is not one folder")
    assert "Traceback" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "work"]  # nothing made, inside or outside
    assert not list((tmp_path / "work").iterdir())


@pytest.mark.slow
def test_a_finished_runs_name_is_not_reused_by_a_new_run(tmp_path: Path) -> None:
    """A second run named like a finished one is refused before anything is written there:
    its checkpoints, metrics and Hydra files stay the first run's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RUN_NAME": "exp1"}
    train = ["-m", f"{PACKAGE}.train", "trainer.max_epochs=1", "logger=csv"]
    first = run_python(train, tmp_path, env)
    assert first.returncode == 0, first.stdout[-3000:]
    run = tmp_path / "outputs" / "train" / "runs" / "exp1"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    again = run_python([*train, "seed=7"], tmp_path, env)
    assert again.returncode == 1
    [line] = [line for line in again.stdout.splitlines() if line.startswith("error: ")]
    named = Path("outputs/train/runs/exp1")  # as the command line's paths are, relative
    assert line == (
        f"error: the run directory {named} holds another run (checkpoints, metrics.json); a "
        "new run there would overwrite it: pick another RUN_NAME, or resume that run with "
        f"ckpt_path={named / 'checkpoints' / 'last.ckpt'}"
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_an_unwritable_run_directory_is_one_line(tmp_path: Path) -> None:
    result = run_cli("train", "hydra.run.dir=/proc/self/x", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: cannot make the run directory /proc/self/x" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.slow
def test_sweep_workers_stop_when_the_sweep_is_killed(tmp_path: Path) -> None:
    """kill -9 of the sweep process: its workers stop with it (they got SIGTERM); before, they
    ran on until their trials ended."""
    sweep = subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.sweep", "sweep.workers=2", "sweep.n_trials=4",
         "trainer.max_epochs=50", "callbacks.progress_bar=null", f"paths.root_dir={tmp_path}"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(1)
        listed = subprocess.run(
            ["pgrep", "-P", str(sweep.pid)], capture_output=True, text=True, check=False
        )
        workers = [int(pid) for pid in listed.stdout.split()]
    assert len(workers) == 2, "the sweep did not start its two workers"
    sweep.kill()
    sweep.wait()
    deadline = time.monotonic() + 60  # a worker finishes its step and saves, then exits
    while time.monotonic() < deadline and any(running(pid) for pid in workers):
        time.sleep(0.5)
    alive = [pid for pid in workers if running(pid)]
    assert not alive, f"workers {alive} outlived the killed sweep"


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an exited process nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_server_metadata_shows_names_not_paths(exported: dict[str, Any]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    app_module = module("commands._serving_app")
    bodies = module("commands._serving_bodies")
    runner = module("models._onnx_runner").OnnxRunner(exported["model"])
    limits = bodies.Limits(max_body_bytes=1 << 24, max_image_pixels=1 << 20)
    client = TestClient(app_module.build_app(runner, exported["model"], limits, 64))
    for route in ("/metadata", "/openapi.json"):
        text = client.get(route).text
        assert str(exported["model"].parent) not in text, route
        assert str(Path(exported["ckpt"]).parent) not in text, route
    assert client.get("/metadata").json()["model"] == "model.onnx"
    huge = "[" + "9" * 8_000_000 + "]"
    answer = client.post("/predict", content=huge, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert json.loads(answer.text)["error"].startswith("the JSON body holds a number")


HOSTILE_CLASSES = {
    "x": "=cmd|' /C calc'!A0",  # a spreadsheet formula
    "y": "$x_{1$",  # broken mathtext: the confusion plot died on it
    "z": "z\x1b]0;pwned\x07\x1b[2J[red]alarm",  # sets the terminal's title, clears it, rich markup
}


@pytest.mark.slow
def test_names_from_a_table_stay_text_in_terminal_plots_and_spreadsheet(tmp_path: Path) -> None:
    """Class names are data: escaped on the terminal, drawn plainly in the plots, and written
    to predictions.csv so a spreadsheet shows them as text, never running them."""
    import csv

    settings = module("data").CsvDataModule.make_fixture(tmp_path)
    table = Path(str(settings["path"]))
    rows = list(csv.reader(table.open()))
    rows[1:] = [[*row[:-1], HOSTILE_CLASSES[row[-1]]] for row in rows[1:]]
    with table.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    overrides = ["data=csv", "model=mlp", "trainer.max_epochs=1", "logger=csv"]
    overrides += [f"data.{key}={value}" for key, value in settings.items()]
    trained = run_cli("train", *overrides, cwd=tmp_path)
    said = trained.stdout + trained.stderr
    assert trained.returncode == 0, said[-3000:]
    assert "\x1b" not in said
    assert "\x07" not in said
    assert "\\x1b]0;pwned\\x07\\x1b[2J[red]alarm" in said  # shown, escaped, markup as text
    [run] = (tmp_path / "outputs" / "train" / "runs").iterdir()
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["per_class"]) == set(HOSTILE_CLASSES.values())
    assert (run / "plots" / "confusion_matrix.png").stat().st_size > 0
    assert (run / "plots" / "per_class.png").stat().st_size > 0
    predicted = run_cli("predict", f"model_path={metrics['best_checkpoint']}", f"inputs={table}",
                        cwd=tmp_path)  # fmt: skip
    assert predicted.returncode == 0, (predicted.stdout + predicted.stderr)[-3000:]
    [written] = (tmp_path / "outputs" / "predict" / "runs").glob("*/predictions.csv")
    names = {row["class_name"] for row in csv.DictReader(written.open())}
    assert "'=cmd|' /C calc'!A0" in names  # prefixed: shown as text
    assert "=cmd|' /C calc'!A0" not in names
    assert names <= {"'=cmd|' /C calc'!A0", "$x_{1$", HOSTILE_CLASSES["z"]}


def test_a_spreadsheet_cell_that_looks_like_a_formula_is_prefixed_and_numbers_stay() -> None:
    cell = module("commands._predict").as_text_cell
    for formula in ("=1+1", "+x", "-x", "@SUM(A1)", "\tx", "\r=1", "\t1"):
        assert cell(formula) == "'" + formula
    for kept in ("-1", "+2.5", "-1e3", "x=1", "", "plain", 3, -1.0):
        assert cell(kept) == kept


def test_a_checkpoints_text_resolves_to_itself_in_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backslashes before ``${`` included: escaping only ``${`` made ``\\${oc.env:X}`` a live
    interpolation that printed the secret."""
    from omegaconf import OmegaConf

    literal = module("checkpoints._run_settings").literal
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t")
    texts = ["${oc.env:SECRET_TOKEN}", "\\${oc.env:SECRET_TOKEN}", "\\\\${oc.env:SECRET_TOKEN}",
             "\\\\\\${x}", "a\\b", "x\\", "$\\{y}", "${a.${b}}", "$${x}", "${", "a${b"]  # fmt: skip
    for text in texts:
        config = OmegaConf.create({"value": literal(text), "nested": literal({"k": [text]})})
        assert config.value == text
        assert config.nested.k[0] == text
        assert "s3cr3t" not in OmegaConf.to_yaml(config, resolve=True)


MEMORY_CAP = 6 << 30  # address space of a command here (torch's own takes 2-3 GiB of it)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["eval", "export", "predict"])
def test_a_checkpoint_whose_settings_build_a_net_larger_than_its_weights_is_refused(
    trained: dict[str, Any], tmp_path: Path, entry: str
) -> None:
    """A sealed checkpoint edited to build a 16-billion-value net (65 GB) from its 29,101
    weights: refused from the meta device's count, under a memory cap, in one line."""
    import resource

    def huge(content: dict[str, Any]) -> None:
        content["hyper_parameters"]["net"]["channels"] = [30000, 30000]

    path = edited(trained, tmp_path, huge)
    np.save(tmp_path / "one.npy", np.zeros((1, 1, 8, 8), dtype=np.float32))
    given = {"eval": [f"ckpt_path={path}"], "export": [f"ckpt_path={path}"],
             "predict": [f"model_path={path}", f"inputs={tmp_path / 'one.npy'}"]}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.{entry}", *given[entry]],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=300, check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP)),
    )  # fmt: skip
    assert result.returncode == 1, (result.stdout + result.stderr)[-3000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert "its settings build a model of 16200930013 values, its weights hold 29101" in line
    assert "Traceback" not in result.stdout + result.stderr
