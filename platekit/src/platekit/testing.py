"""Test helpers for a project built on platekit: configs, commands, runs, the data contract.

A project's tests import them::

    from platekit.testing import QUICK, compose_config, read_json, run_cli

Every helper works on the current project (``platekit.current()``), which importing the
project's package sets; a project's ``tests/conftest.py`` imports it first. It needs
``pytest`` (a project's dev requirements install it), so nothing outside tests imports it.

What is here:

- configs: :func:`compose_config` (what an entry point would see), :func:`config_options`,
  :func:`data_fixture` (a data config pointed at the small data set its module writes);
- commands: :func:`run_cli` / :func:`start_cli` (``python -m <package>.<entry>`` in a
  subprocess), :func:`launch_train` / :func:`finish` for multi-process runs;
- runs: callbacks a test adds with ``+callbacks.<name>._target_=platekit.testing.<Class>``
  (:class:`StepLosses`, :class:`CrashAfter`, :class:`StopAfterEpoch`,
  :class:`BatchRecorder`, :class:`RankProbe`) and readers of what they wrote;
- :class:`DataContract`: the contract tests, run for every ``configs/data/*.yaml``.
"""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from lightning import Callback, LightningModule, Trainer
from omegaconf import DictConfig

from platekit._project import Project, current
from platekit.commands import _bench as benchmark_loops  # noqa: F401  (bench's timed loops, for the GPU tier)
from platekit.commands._bench import data_verdict as data_verdict

# Small and quick, yet a real run: 3 epochs over the full data. The csv logger whatever the
# project's default, since tests read its metrics.csv.
QUICK = [
    "trainer.max_epochs=3",
    "callbacks.progress_bar=null",
    "trainer.accelerator=cpu",
    "logger=csv",
]
HERE = __name__  # callbacks below are named as f"{HERE}.<Class>" in overrides


# ---- configs ------------------------------------------------------------------------------


def project() -> Project:
    """The project under test (its package, folder and configs)."""
    return current()


def compose_config(
    output_dir: Path, overrides: list[str] | None = None, config_name: str = "train"
) -> DictConfig:
    """The config an entry point would see, with its run directory set to ``output_dir``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(version_base="1.3", config_dir=str(project().config_dir)):
        return compose(
            config_name=config_name,
            overrides=[f"paths.output_dir={output_dir}", *(overrides or [])],
        )


def config_options(group: str) -> list[str]:
    """The option names of a config group (``config_options("data")``: digits, csv, ...)."""
    return sorted(path.stem for path in (project().config_dir / group).glob("*.yaml"))


def fixture_settings(name: str, directory: Path) -> dict[str, Any] | None:
    """The ``data.*`` settings of ``configs/data/<name>.yaml``'s module pointed at the small
    data set it writes under ``directory`` (``make_fixture``); ``None`` if it writes none."""
    from hydra.utils import get_class

    data = compose_config(directory, [f"data={name}"]).data
    kind = {"target_kind": "value"} if data.get("target_kind") == "value" else {}
    settings = get_class(data._target_).make_fixture(directory, **kind)  # type: ignore[attr-defined]
    if settings is None:
        return None
    if "data_dir" in data:  # where a module writes files of its own
        settings = {**settings, "data_dir": str(directory / "data")}
    return settings


def data_fixture(name: str, directory: Path) -> list[str] | None:
    """Overrides selecting ``configs/data/<name>.yaml`` on the small data set its module
    writes under ``directory`` (``make_fixture``); ``None`` if the module writes none."""
    settings = fixture_settings(name, directory)
    if settings is None:
        return None
    return [f"data={name}", *(f"data.{key}={value}" for key, value in settings.items())]


def named_again(overrides: list[str]) -> list[str]:
    """The ``data.<setting>=`` overrides of ``overrides`` as eval, export and predict take them
    (``+data.path=...``): a checkpoint's data paths outside the project are used only when
    the user names them again."""
    return [f"+{o}" for o in overrides if o.startswith("data.") and "=" in o]


def build_datamodule(output_dir: Path, overrides: list[str], stage: str = "fit") -> Any:
    """The configured data module, set up."""
    from hydra.utils import instantiate

    datamodule = instantiate(compose_config(output_dir, overrides).data)
    datamodule.setup(stage)
    return datamodule


# ---- commands -----------------------------------------------------------------------------


def cli_env(**extra: str) -> dict[str, str]:
    """The environment a command of the tests runs with: the project's ``src`` and ``tests``
    importable, its configs, one thread (plus ``extra``)."""
    root = project().root
    # A W&B run in the test process exports its service's address; a command of its own
    # starts its own service, as a user's would (sharing one refuses a resumed run's id).
    inherited = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    return {
        **inherited,
        "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root / "tests")]),
        "CONFIG_DIR": str(project().config_dir),
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def start_cli(entry: str, *overrides: str, cwd: Path, **popen: Any) -> subprocess.Popen[str]:
    """Start ``python -m <package>.<entry> overrides...`` from ``cwd``; output as text pipes."""
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.Popen(
        [sys.executable, "-m", f"{project().package}.{entry}", *overrides],
        cwd=cwd,
        env=options.pop("env", None) or cli_env(),
        text=True,
        **options,
    )


def run_cli(
    entry: str,
    *overrides: str,
    cwd: Path,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <package>.<entry> overrides...`` in a subprocess from ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", f"{project().package}.{entry}", *overrides],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Launcher variables from outside must not decide the world of a test's run.
LAUNCHER_VARIABLES = ("SLURM_", "TORCHELASTIC_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_")


def launch(
    command: list[str], log: Path, env: dict[str, str] | None = None, **variables: str
) -> subprocess.Popen[bytes]:
    """Start ``command`` in the project's folder, output to ``log``, in ``env`` (by default
    :func:`cli_env`) without launcher variables but those in ``variables``."""
    base = env or cli_env()
    inherited = {k: v for k, v in base.items() if not k.startswith(LAUNCHER_VARIABLES)}
    full_env = {**inherited, "PYTHON": sys.executable, **variables}
    with log.open("w") as handle:
        return subprocess.Popen(
            command, cwd=project().root, env=full_env, stdout=handle, stderr=handle
        )


def launch_train(
    log: Path, *overrides: str, env: dict[str, str] | None = None, **variables: str
) -> subprocess.Popen[bytes]:
    """``python -m <package>.train overrides...``; Lightning starts other ranks itself."""
    command = [sys.executable, "-m", f"{project().package}.train", *overrides]
    return launch(command, log, env, **variables)


def finish(processes: list[subprocess.Popen[Any]], logs: list[Path], timeout: float = 300) -> None:
    """Wait for each process; kill its tree on timeout; each must exit 0 (else its log)."""
    for process, log in zip(processes, logs, strict=True):
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(process.pid)
            raise
        assert process.returncode == 0, log.read_text()[-3000:]


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it, as if its machine died (torchrun starts
    its workers in their own sessions, so the launcher's process group is not enough)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    todo = [pid]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(pid, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---- outputs ------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """Parse ``path`` as strict JSON: NaN, Infinity and -Infinity are refused, as a strict
    parser (jq, browsers, most languages) refuses them."""
    return json.loads(path.read_text(), parse_constant=refuse_constant)


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


# A warning printed by Python's warnings module (Lightning's rank_zero_warn included):
# ``/path/to/file.py:123: message``. The project's own warnings go through logging.
WARNING_LINE = re.compile(r"\.py:\d+: |Warning: ")


def foreign_warnings(output: str) -> list[str]:
    """The lines of ``output`` that are warnings from outside the project's own logging."""
    return [line for line in output.splitlines() if WARNING_LINE.search(line)]


def final_state(run_dir: Path) -> dict[str, Any]:
    """Every tensor of a run's ``last.ckpt``: weights, buffers and the optimizer's moments."""
    import torch

    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    state = dict(checkpoint["state_dict"])
    for index, moments in checkpoint["optimizer_states"][0]["state"].items():
        state.update({f"optimizer.{index}.{name}": value for name, value in moments.items()})
    return state


def differing_tensors(run_dir: Path, reference: Path) -> list[str]:
    """The names of the final tensors in which two runs differ (all of them, if the sets do)."""
    import torch

    expected, actual = final_state(reference), final_state(run_dir)
    if expected.keys() != actual.keys():
        return sorted(expected.keys() ^ actual.keys())
    return [key for key, tensor in expected.items() if not torch.equal(actual[key], tensor)]


# ---- callbacks a test adds to a run -------------------------------------------------------


class StepLosses(Callback):
    """Append ``<global step> <loss as float.hex>`` to ``path`` after every training step;
    the file is appended to, so a resumed run continues it (:func:`loss_logging`)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        with self.path.open("a") as handle:
            handle.write(f"{trainer.global_step} {float(outputs['loss']).hex()}\n")


def loss_logging(path: Path) -> list[str]:
    """The overrides that add :class:`StepLosses` writing to ``path``."""
    return [f"+callbacks.losses._target_={HERE}.StepLosses", f"+callbacks.losses.path={path}"]


def step_losses(path: Path) -> dict[int, str]:
    """Step -> loss from a :class:`StepLosses` file; a step run twice (replayed after a
    crash) keeps its last value."""
    pairs = (line.split() for line in path.read_text().splitlines())
    return {int(step): loss for step, loss in pairs}


class CrashError(Exception):
    """Stands in for a crash: raised after a given training step."""


class CrashAfter(Callback):
    """Raise :class:`CrashError` after global step ``step`` (:func:`crash_after`)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise CrashError(f"crashed after step {self.step}")


def crash_after(step: int) -> list[str]:
    return [f"+callbacks.crash._target_={HERE}.CrashAfter", f"+callbacks.crash.step={step}"]


class StopAfterEpoch(Callback):
    """End fit after ``epoch`` as a finished run would, its epoch-end last.ckpt written."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.current_epoch == self.epoch:
            trainer.should_stop = True


def stop_after_epoch(epoch: int) -> list[str]:
    return [f"+callbacks.stop._target_={HERE}.StopAfterEpoch", f"+callbacks.stop.epoch={epoch}"]


class BatchRecorder(Callback):
    """Save every training batch's inputs (as the model got them) by global step."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        import torch

        self.path.mkdir(parents=True, exist_ok=True)
        torch.save(batch[0].cpu(), self.path / f"step_{trainer.global_step:05d}.pt")


def batch_recording(path: Path) -> list[str]:
    return [f"+callbacks.batches._target_={HERE}.BatchRecorder", f"+callbacks.batches.path={path}"]


def recorded_batches(path: Path) -> dict[str, Any]:
    import torch

    return {p.stem: torch.load(p) for p in sorted(path.glob("step_*.pt"))}


class RankProbe(Callback):
    """What each rank of a run saw, in ``out_dir``: the training inputs of every epoch in
    order (``inputs_rank<r>_epoch<e>.pt``) and, at the end of fit, its weights and the
    validation metrics it was given (``final_rank<r>.pt``)."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = Path(out_dir)
        self.inputs: list[Any] = []
        self.val: dict[str, float] = {}

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.inputs = []

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.inputs.append(batch[0].detach().cpu().clone())

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        import torch

        name = f"inputs_rank{trainer.global_rank}_epoch{trainer.current_epoch}.pt"
        self.save(torch.cat(self.inputs), name)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        metrics = trainer.callback_metrics
        self.val = {k: float(v) for k, v in metrics.items() if k.startswith("val/")}

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        final = {"state_dict": pl_module.state_dict(), "val": self.val}
        self.save(final, f"final_rank{trainer.global_rank}.pt")

    def save(self, data: Any, name: str) -> None:
        import torch

        self.out_dir.mkdir(parents=True, exist_ok=True)
        torch.save(data, self.out_dir / name)


def probe(out_dir: Path) -> list[str]:
    return [f"+callbacks.probe._target_={HERE}.RankProbe", f"+callbacks.probe.out_dir={out_dir}"]


# ---- data ---------------------------------------------------------------------------------


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


# ---- the data contract --------------------------------------------------------------------


class DataContract:
    """The data contract's tests, for every ``configs/data/<name>.yaml`` of the project.

    Subclass it in a test module and it runs on each data config whose module writes a
    small data set (``make_fixture``); a new data module is tested with no new test code::

        class TestDataContract(DataContract):
            pass

    Quick: the module sets up from its fixture with consistent metadata, the same seed gives
    the same split, a batch has the promised shape. Slow tier: a short run trains and stores
    the data's description in its checkpoint; an interrupted run resumes mid-epoch bitwise
    equal (augmented inputs included); export passes parity; predict gives the same answers
    from raw files with both backends; under two gloo ranks each rank trains on its own
    shard of the (seed, epoch) order, the shards covering the split.
    """

    EPOCHS = 2
    WORLD = 2
    BASE: ClassVar[list[str]] = [
        *QUICK,
        f"trainer.max_epochs={EPOCHS}",
        "callbacks.early_stopping=null",
        "callbacks.model_checkpoint.last_every_n_steps=1",
        "trainer.precision=32-true",
    ]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "data_config" in metafunc.fixturenames:
            names = config_options("data")
            metafunc.parametrize("data_config", names, ids=names, scope="class")

    @pytest.fixture(scope="class")
    @classmethod
    def contract(cls, data_config: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        """The data config on its module's fixture data, with a net that takes its inputs."""
        root = tmp_path_factory.mktemp(f"contract_{data_config}")
        data_args = data_fixture(data_config, root)
        if data_args is None:
            pytest.skip(
                f"configs/data/{data_config}.yaml: its data module defines no "
                "make_fixture(directory); define it (platekit.data.BaseDataModule) to run "
                "the contract tests on it"
            )
        info = build_datamodule(root, data_args).info
        if not info.varying_axes:  # sequences: the net their data config names
            data_args.append("model=cnn" if len(info.input_shape) == 3 else "model=mlp")
        return {"name": data_config, "root": root, "data_args": data_args}

    @pytest.fixture(scope="class")
    @classmethod
    def trained(cls, contract: dict[str, Any]) -> dict[str, Any]:
        """One uninterrupted run of the data config: its directory and metrics."""
        run_dir = contract["root"] / "uninterrupted"
        overrides = [*cls.BASE, *contract["data_args"], *cls.recording(run_dir)]
        metrics = project_module("train").train(compose_config(run_dir, overrides), overrides)
        return {"run_dir": run_dir, "metrics": metrics}

    @pytest.fixture(scope="class")
    @classmethod
    def exported(cls, contract: dict[str, Any], trained: dict[str, Any]) -> dict[str, Any]:
        checkpoint = trained["metrics"]["best_checkpoint"]
        out = contract["root"] / "export"
        given = [f"ckpt_path={checkpoint}", "repeats=2", *named_again(contract["data_args"])]
        cfg = compose_config(out, given, "export")
        report = project_module("export").export(cfg)
        return {"report": report, "model": out / "model.onnx", "ckpt": checkpoint}

    @staticmethod
    def recording(run_dir: Path) -> list[str]:
        return [*loss_logging(run_dir / "losses.txt"), *batch_recording(run_dir / "batches")]

    @staticmethod
    def datamodule(contract: dict[str, Any]) -> Any:
        return build_datamodule(contract["root"], contract["data_args"])

    # ---- quick ----

    def test_sets_up_with_consistent_metadata(self, contract: dict[str, Any]) -> None:
        import torch

        datamodule = self.datamodule(contract)
        info, parts = datamodule.info, datamodule.parts
        assert set(parts) == {"train", "val", "test"}
        indices = torch.cat(list(parts.values())).tolist()
        assert len(set(indices)) == len(indices) == len(datamodule.rows)  # a partition
        raw = datamodule.raw_inputs("train")
        assert tuple(raw.shape) == (len(parts["train"]), *info.input_shape)
        assert bool(torch.isfinite(raw).all())
        targets = datamodule.targets("train")
        if info.target_kind == "class":
            assert info.num_classes == len(info.class_names) >= 2
            assert targets.dtype == torch.int64
            assert 0 <= int(targets.min()) <= int(targets.max()) < info.num_classes
        else:
            assert info.target_kind == "value"
            assert targets.is_floating_point()
        assert info.input_description  # what export and predict tell users an input is
        inputs, batch_targets = next(iter(datamodule.train_dataloader()))
        assert tuple(inputs.shape[1:]) == tuple(info.input_shape)
        assert len(inputs) == len(batch_targets) == datamodule.hparams.batch_size

    def test_same_seed_gives_the_same_split_and_statistics(self, contract: dict[str, Any]) -> None:
        import torch

        first, second = self.datamodule(contract), self.datamodule(contract)
        for split, index in first.parts.items():
            assert torch.equal(index, second.parts[split]), split
        assert torch.equal(first.mean, second.mean)
        assert torch.equal(first.std, second.std)

    # ---- slow ----

    @pytest.mark.slow
    def test_trains_with_metadata_in_the_checkpoint(
        self, contract: dict[str, Any], trained: dict[str, Any]
    ) -> None:
        import numpy as np
        import torch

        metrics = trained["metrics"]
        assert metrics["epochs"] == self.EPOCHS
        assert all(np.isfinite(v) for v in metrics["test"].values())
        card = torch.load(metrics["best_checkpoint"], weights_only=True)["data"]
        datamodule = self.datamodule(contract)
        assert card["_target_"].endswith(type(datamodule).__name__)
        assert tuple(card["info"]["input_shape"]) == datamodule.info.input_shape
        assert card["info"]["class_names"] == list(datamodule.info.class_names)
        assert card["mean"].shape == datamodule.mean.shape  # statistics of any shape

    @pytest.mark.slow
    def test_resume_mid_epoch_is_bitwise_equal(
        self, contract: dict[str, Any], trained: dict[str, Any], tmp_path: Path
    ) -> None:
        import torch

        train = project_module("train").train
        steps_per_epoch = len(self.datamodule(contract).train_dataloader())
        # Lightning runs checkpoint callbacks last, so the crash comes before that step's
        # write: last.ckpt holds step steps_per_epoch + 1, and epoch 1 resumes at its batch 1.
        crash_step = steps_per_epoch + 2
        run_dir = tmp_path / "run"
        overrides = [*self.BASE, *contract["data_args"], *self.recording(run_dir)]
        crashing = [*overrides, *crash_after(crash_step)]
        with pytest.raises(CrashError):
            train(compose_config(run_dir, crashing), crashing)
        last = run_dir / "checkpoints" / "last.ckpt"
        assert torch.load(last, weights_only=True)["global_step"] == crash_step - 1
        resuming = [*overrides, f"ckpt_path={last}"]  # the data's paths named again
        train(compose_config(run_dir, resuming), resuming)

        reference = trained["run_dir"]
        assert step_losses(run_dir / "losses.txt") == step_losses(reference / "losses.txt")
        expected = recorded_batches(reference / "batches")
        actual = recorded_batches(run_dir / "batches")
        assert expected.keys() == actual.keys()
        for step, inputs in expected.items():  # the very same (augmented) tensors each step
            assert torch.equal(actual[step], inputs), step
        final = torch.load(last, weights_only=True)["state_dict"]
        reference_last = reference / "checkpoints" / "last.ckpt"
        for key, tensor in torch.load(reference_last, weights_only=True)["state_dict"].items():
            assert torch.equal(final[key], tensor), key

    @pytest.mark.slow
    def test_export_passes_parity_and_names_the_input(
        self, contract: dict[str, Any], exported: dict[str, Any]
    ) -> None:
        import torch

        report = exported["report"]
        assert all(row["within_tolerance"] and row["classes_agree"] for row in report["parity"])
        kind = torch.load(exported["ckpt"], weights_only=True)["data"]["info"]["target_kind"]
        expected = ["values"] if kind == "value" else ["logits", "probabilities"]
        assert [output["name"] for output in report["outputs"]] == expected
        datamodule = self.datamodule(contract)
        assert report["inputs"][0]["name"] == datamodule.input_name
        shape = list(datamodule.info.input_shape)
        for axis in datamodule.info.varying_axes:  # a sequence's length: free in the graph
            shape[axis] = "length"
        assert report["inputs"][0]["shape"][1:] == shape
        assert report["input_description"] == datamodule.info.input_description

    @pytest.mark.slow
    def test_predict_from_raw_files_agrees_across_backends(
        self, contract: dict[str, Any], exported: dict[str, Any], tmp_path: Path
    ) -> None:
        import numpy as np
        import torch

        predict = project_module("predict").predict
        datamodule = self.datamodule(contract)
        answers = []
        for path in raw_files(datamodule, tmp_path / "inputs"):
            rows = {}
            for backend in ("ckpt", "model"):
                overrides = [f"model_path={exported[backend]}", f"inputs={path}"]
                rows[backend] = predict(compose_config(tmp_path / backend, overrides, "predict"))
            answers.append([r.get("probability", r.get("value")) for r in rows["model"]])
            if datamodule.info.varying_axes:  # the same sequences, however they were given
                np.testing.assert_allclose(answers[-1], answers[0], atol=1e-5)
            if datamodule.info.target_kind == "value":  # a regression predicts values
                # the input, its value, and what lies outside the training range (or '')
                assert all(set(r) == {"input", "value", OUTSIDE} for r in rows["model"]), path
                np.testing.assert_allclose(  # values of any size (the fixture's: ~2e5)
                    np.array([r["value"] for r in rows["ckpt"]]),
                    np.array([r["value"] for r in rows["model"]]),
                    rtol=1e-5,
                    atol=1e-3,
                )
                continue
            assert [r["class"] for r in rows["ckpt"]] == [r["class"] for r in rows["model"]]
            np.testing.assert_allclose(
                [r["probability"] for r in rows["ckpt"]],
                [r["probability"] for r in rows["model"]],
                atol=1e-4,
            )
            names = datamodule.info.class_names
            assert all(r["class_name"] == names[r["class"]] for r in rows["model"])
        card = torch.load(exported["ckpt"], weights_only=True)["data"]
        assert card["info"]["split_sizes"]["test"] == len(datamodule.parts["test"])

    @pytest.mark.slow
    def test_padding_does_not_change_predictions(
        self, contract: dict[str, Any], exported: dict[str, Any]
    ) -> None:
        import numpy as np

        from platekit.checkpoints._restore import Checkpoint
        from platekit.data._padding import check_sequences
        from platekit.models._exportable import from_checkpoint
        from platekit.models._onnx_runner import OnnxRunner
        from platekit.models._runners import TorchRunner

        info = self.datamodule(contract).info
        if info.varying_axis is None:
            pytest.skip(f"{contract['name']}: inputs of one size, nothing is padded")
        axis = 1 + info.varying_axis
        raw = self.datamodule(contract).raw_inputs("test", limit=16).float().numpy()
        own = [check_sequences(row[None], None, info, "test row") for row in raw]  # unpadded
        assert len({row.shape[axis] for row in own}) > 1, "the rows must differ in length"
        width = [(0, 0)] * raw.ndim
        width[axis] = (0, 7)  # seven more padding steps than training ever saw
        longer = np.pad(raw, width, constant_values=info.padding_value)
        checkpoint = Checkpoint.open(exported["ckpt"])
        torch_runner = TorchRunner(from_checkpoint(checkpoint), info)
        for runner in (torch_runner, OnnxRunner(exported["model"])):
            padded = runner(raw)[-1]  # each row padded to the training length, in one batch
            alone = np.concatenate([runner(row)[-1] for row in own])  # each at its own length
            np.testing.assert_allclose(alone, padded, atol=1e-5, rtol=0)
            np.testing.assert_allclose(runner(longer)[-1], padded, atol=1e-5, rtol=0)

    @pytest.mark.slow
    def test_two_ranks_train_on_disjoint_shards_covering_the_split(
        self, contract: dict[str, Any], tmp_path: Path
    ) -> None:
        import torch

        log = tmp_path / "ddp.log"
        process = launch_train(
            log, "trainer=ddp_cpu", "trainer.max_epochs=1", "callbacks.progress_bar=null",
            "trainer.precision=32-true", *contract["data_args"], *probe(tmp_path / "probe"),
            f"paths.root_dir={tmp_path}",
        )  # fmt: skip
        finish([process], [log])
        datamodule = self.datamodule(contract)
        probes = tmp_path / "probe"
        seen = [torch.load(probes / f"inputs_rank{r}_epoch0.pt") for r in range(self.WORLD)]
        for rank in range(self.WORLD):  # exactly its own shard: not all data, not sharded twice
            expected = expected_shard(datamodule, rank, 0, self.WORLD)
            assert torch.equal(seen[rank], expected), rank
        from platekit.data._sampling import EpochBatchSampler

        size = len(datamodule.parts["train"])
        shards = [
            set(torch.cat([batch for batch in sampler if isinstance(batch, torch.Tensor)]).tolist())
            for sampler in (
                EpochBatchSampler(size, 8, shuffle=True, seed=0, rank=r, world_size=self.WORLD)
                for r in range(self.WORLD)
            )
        ]
        assert set.union(*shards) == set(range(size))
        assert len(shards[0] & shards[1]) <= 1  # one padding row at most when the split is odd


OUTSIDE = "outside_training_range"  # predict's flag column (commands/_predict.py)


def raw_test_split(directory: Path, seed: int = 0) -> dict[str, Any]:
    """The project's default data module's test split as a raw ``test.npy`` in ``directory``
    (what a user feeds predict), with the raw array and the labels."""
    import numpy as np
    from hydra.utils import instantiate

    datamodule = instantiate(compose_config(directory, [f"seed={seed}"]).data)
    datamodule.setup("test")
    raw = datamodule.raw_inputs("test").numpy()
    path = directory / "test.npy"
    np.save(path, raw)
    return {"path": path, "raw": raw, "labels": datamodule.split_tensors("test").targets.numpy()}


def shipped_model(checkpoint_path: str | Path) -> Any:
    """A checkpoint's net as export and predict run it: its normalisation inside, in eval mode
    on the CPU. It takes raw inputs and returns ``(outputs, probabilities)`` for classes,
    ``(outputs,)`` for values."""
    from platekit.checkpoints._restore import Checkpoint
    from platekit.models._exportable import from_checkpoint

    return from_checkpoint(Checkpoint.open(checkpoint_path))


def predict_rows(out_dir: Path, model_path: Any, inputs: Any, *extra: str) -> list[dict[str, Any]]:
    """The project's ``predict`` of ``inputs`` (a path, or a list of paths) with a model."""
    if isinstance(inputs, list):
        inputs = "[" + ",".join(map(str, inputs)) + "]"
    overrides = [f"model_path={model_path}", f"inputs={inputs}", *extra]
    rows: list[dict[str, Any]] = project_module("predict").predict(
        compose_config(out_dir, overrides, "predict")
    )
    return rows


def project_module(name: str) -> Any:
    """``<package>.<name>`` of the project under test (``project_module("train").train``)."""
    from importlib import import_module

    return import_module(f"{project().package}.{name}")


def raw_files(datamodule: Any, directory: Path) -> list[Path]:
    """The test split as files a user has: a .npy of raw inputs, and the original files."""
    import numpy as np
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    array = directory / "test.npy"
    np.save(array, datamodule.raw_inputs("test").numpy())
    files = [array]
    items = datamodule.rows.inputs
    if not isinstance(items, torch.Tensor):  # e.g. image paths
        files += [Path(items[int(i)]) for i in datamodule.parts["test"][:8]]
    if datamodule.info.feature_names:  # a table: the CSV itself
        files.append(Path(datamodule.hparams.path))
    if datamodule.info.varying_axes:  # sequences: as lists, and as a padded array + lengths
        files += sequence_files(datamodule.raw_inputs("test").numpy(), datamodule.info, directory)
    return files


def sequence_files(raw: Any, info: Any, directory: Path) -> list[Path]:
    """Padded sequences ``raw`` as a user writes them: ``test.json`` (a list per row, each
    of its own length) and ``test_lengths.npz`` (int64 tokens, a tail of junk, ``lengths``)."""
    import numpy as np

    from platekit.data._padding import check_sequences, step_is_padding

    axis = 1 + info.varying_axis
    lengths = (~step_is_padding(raw, axis, info.padding_value)).sum(axis=1)
    rows = [check_sequences(row[None], None, info, "test row")[0] for row in raw]
    (directory / "test.json").write_text(json.dumps([row.tolist() for row in rows]))
    junk = raw.copy()
    beyond = np.arange(raw.shape[axis])[None, :] >= lengths[:, None]  # (N, L)
    np.moveaxis(junk, axis, 1)[beyond] = info.padding_value + 1  # anything but padding
    dtype = np.int64 if info.vocab_size else np.float32
    np.savez(directory / "test_lengths.npz", inputs=junk.astype(dtype), lengths=lengths)
    return [directory / "test.json", directory / "test_lengths.npz"]


def expected_shard(datamodule: Any, rank: int, epoch: int, world: int) -> Any:
    """What ``rank`` must train on in ``epoch``: its shard of the (seed, epoch) order."""
    import torch

    from platekit.data._base import SplitSamples
    from platekit.data._sampling import EpochBatchSampler

    sampler = EpochBatchSampler(
        len(datamodule.parts["train"]),
        datamodule.hparams.batch_size,
        shuffle=True,
        seed=datamodule.hparams.seed,
        rank=rank,
        world_size=world,
    )
    sampler.set_epoch(epoch)
    samples = SplitSamples(datamodule, "train", train=True)
    return torch.cat([samples[(epoch, index)][0] for index in sampler])  # type: ignore[index]
