"""The data contract, over every data config in configs/data/ (yours too, with no new test).

For each ``configs/data/<name>.yaml`` whose data module can make a small fixture
(``make_fixture``, see data/base.py): a short run trains, an interrupted run resumes
mid-epoch bitwise equal (augmented inputs included), export passes parity, predict gives
the same answers from raw files with both backends, and under two gloo ranks each rank
trains on its own shard of the (seed, epoch) order, the shards covering the split.
A plain LightningDataModule (tests/plain_datamodule.py) trains, shards and warns.
"""

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra.utils import get_class, instantiate
from lightning import Callback, LightningModule, Trainer

from test_distributed import WORLD, finish, probe
from test_distributed import train as launch_train
from test_resume import CrashError

from support import CONFIG_DIR, QUICK, compose_config, loss_logging, module, step_losses

pytestmark = pytest.mark.slow

train = module("train")
export = module("export")
predict = module("predict")
data = module("data")
SplitSamples = module("data.base").SplitSamples
EpochBatchSampler = module("data.sampling").EpochBatchSampler

DATA_CONFIGS = sorted(path.stem for path in (CONFIG_DIR / "data").glob("*.yaml"))
EPOCHS = 2
BASE = [
    *QUICK,
    f"trainer.max_epochs={EPOCHS}",
    "callbacks.early_stopping=null",
    "callbacks.model_checkpoint.last_every_n_steps=1",
    "trainer.precision=32-true",
]


class BatchRecorder(Callback):
    """Save every training batch's inputs (as the model got them) by global step."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        torch.save(batch[0].cpu(), self.path / f"step_{trainer.global_step:05d}.pt")


def recorded(path: Path) -> dict[str, torch.Tensor]:
    return {p.stem: torch.load(p) for p in sorted(path.glob("step_*.pt"))}


def data_class(name: str) -> type:
    cfg = compose_config(Path("/unused"), [f"data={name}"])
    return get_class(cfg.data._target_)


@pytest.fixture(scope="module", params=DATA_CONFIGS)
def contract(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Per data config: its fixture settings, and one uninterrupted 2-epoch run."""
    name = request.param
    root = tmp_path_factory.mktemp(f"contract_{name}")
    settings = data_class(name).make_fixture(root, **fixture_kind(name))
    if settings is None:
        pytest.skip(
            f"configs/data/{name}.yaml: its data module defines no make_fixture(directory); "
            "define it (data/base.py) to run the contract tests on it"
        )
    data_args = [f"data={name}", *(f"data.{k}={v}" for k, v in settings.items())]
    data_args.append(f"paths.data_dir={root / 'data'}")  # where a module writes its own files
    # The fixture's files lie under root: the commands that reopen its checkpoints may read
    # them as stored only there (a checkpoint's paths elsewhere must be named again).
    data_args.append(f"paths.root_dir={root}")
    shape = built_datamodule({"root": root, "data_args": data_args}).info.input_shape
    data_args.append("model=cnn" if len(shape) == 3 else "model=mlp")  # a net for the data
    run_dir = root / "uninterrupted"
    overrides = [*BASE, *data_args, *recording(run_dir)]
    metrics = train.train(compose_config(run_dir, overrides))
    return {
        "name": name,
        "root": root,
        "data_args": data_args,
        "run_dir": run_dir,
        "metrics": metrics,
    }


def fixture_kind(name: str) -> dict[str, str]:
    """A data config for real-valued targets (``target_kind: value``) asks for such a fixture."""
    cfg = compose_config(Path("/unused"), [f"data={name}"])
    return {"target_kind": "value"} if cfg.data.get("target_kind") == "value" else {}


def recording(run_dir: Path) -> list[str]:
    return [
        *loss_logging(run_dir / "losses.txt"),
        "+callbacks.batches._target_=test_data_contract.BatchRecorder",
        f"+callbacks.batches.path={run_dir / 'batches'}",
    ]


def built_datamodule(contract: dict) -> Any:
    cfg = compose_config(contract["root"], contract["data_args"])
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    return datamodule


def test_trains_with_metadata_in_the_checkpoint(contract: dict) -> None:
    metrics = contract["metrics"]
    assert metrics["epochs"] == EPOCHS
    assert all(np.isfinite(v) for v in metrics["test"].values())
    card = torch.load(metrics["best_checkpoint"], weights_only=True)["data"]
    datamodule = built_datamodule(contract)
    assert card["_target_"].endswith(type(datamodule).__name__)
    assert tuple(card["info"]["input_shape"]) == datamodule.info.input_shape
    assert card["info"]["class_names"] == list(datamodule.info.class_names)
    assert card["mean"].shape == datamodule.mean.shape  # statistics of any shape


def test_resume_mid_epoch_is_bitwise_equal(contract: dict, tmp_path: Path) -> None:
    datamodule = built_datamodule(contract)
    steps_per_epoch = len(datamodule.train_dataloader())
    # Lightning runs checkpoint callbacks last, so the crash comes before that step's write:
    # last.ckpt holds step steps_per_epoch + 1, and epoch 1 resumes at its batch 1 (odd).
    crash_step = steps_per_epoch + 2
    run_dir = tmp_path / "run"
    crash = [
        "+callbacks.crash._target_=test_resume.CrashAfter",
        f"+callbacks.crash.step={crash_step}",
    ]
    overrides = [*BASE, *contract["data_args"], *recording(run_dir)]
    with pytest.raises(CrashError):
        train.train(compose_config(run_dir, [*overrides, *crash]))
    last = run_dir / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == crash_step - 1
    train.train(compose_config(run_dir, [*overrides, f"ckpt_path={last}"]))

    reference = contract["run_dir"]
    assert step_losses(run_dir / "losses.txt") == step_losses(reference / "losses.txt")
    expected, actual = recorded(reference / "batches"), recorded(run_dir / "batches")
    assert expected.keys() == actual.keys()
    for step, inputs in expected.items():  # the very same (augmented) tensors at every step
        assert torch.equal(actual[step], inputs), step
    final = torch.load(last, weights_only=True)["state_dict"]
    for key, tensor in torch.load(reference / "checkpoints" / "last.ckpt")["state_dict"].items():
        assert torch.equal(final[key], tensor), key


@pytest.fixture(scope="module")
def exported(contract: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp(f"export_{contract['name']}")
    checkpoint = contract["metrics"]["best_checkpoint"]
    overrides = [f"ckpt_path={checkpoint}", "repeats=2", f"paths.root_dir={contract['root']}"]
    cfg = compose_config(out, overrides, config_name="export")
    report = export.export(cfg)
    return {"report": report, "model": out / "model.onnx", "ckpt": checkpoint}


def test_export_passes_parity_and_names_the_input(contract: dict, exported: dict) -> None:
    report = exported["report"]
    assert all(row["max_abs_diff"] < 1e-4 and row["classes_agree"] for row in report["parity"])
    kind = torch.load(exported["ckpt"], weights_only=True)["data"]["info"]["target_kind"]
    expected = ["values"] if kind == "value" else ["logits", "probabilities"]
    assert [output["name"] for output in report["outputs"]] == expected
    datamodule = built_datamodule(contract)
    assert report["inputs"][0]["name"] == datamodule.input_name
    assert report["inputs"][0]["shape"][1:] == list(datamodule.info.input_shape)
    assert report["input_description"] == datamodule.info.input_description


def raw_files(datamodule: Any, directory: Path) -> list[Path]:
    """The test split as files a user has: a .npy of raw inputs, and the original files."""
    directory.mkdir(parents=True, exist_ok=True)
    array = directory / "test.npy"
    np.save(array, datamodule.raw_inputs("test").numpy())
    files = [array]
    items = datamodule.rows.inputs
    if not isinstance(items, torch.Tensor):  # e.g. image paths
        files += [Path(items[int(i)]) for i in datamodule.parts["test"][:8]]
    if datamodule.info.feature_names:  # a table: the CSV itself
        files.append(Path(datamodule.hparams.path))
    return files


def test_predict_from_raw_files_agrees_across_backends(
    contract: dict, exported: dict, tmp_path: Path
) -> None:
    datamodule = built_datamodule(contract)
    for path in raw_files(datamodule, tmp_path / "inputs"):
        rows = {}
        for backend in ("ckpt", "model"):
            cfg = compose_config(
                tmp_path / backend,
                [f"model_path={exported[backend]}", f"inputs={path}"],
                config_name="predict",
            )
            rows[backend] = predict.predict(cfg)
        if datamodule.info.target_kind == "value":  # a regression predicts values
            assert all(set(r) == {"input", "value"} for r in rows["model"]), path
            np.testing.assert_allclose(
                [r["value"] for r in rows["ckpt"]], [r["value"] for r in rows["model"]], atol=1e-3
            )
            continue
        assert [r["class"] for r in rows["ckpt"]] == [r["class"] for r in rows["model"]], path
        np.testing.assert_allclose(
            [r["probability"] for r in rows["ckpt"]],
            [r["probability"] for r in rows["model"]],
            atol=1e-4,
        )
        names = datamodule.info.class_names
        assert all(r["class_name"] == names[r["class"]] for r in rows["model"])
    card = torch.load(exported["ckpt"], weights_only=True)["data"]
    assert card["info"]["split_sizes"]["test"] == len(datamodule.parts["test"])


def expected_shard(datamodule: Any, rank: int, epoch: int) -> torch.Tensor:
    """What ``rank`` must train on in ``epoch``: its shard of the (seed, epoch) order."""
    sampler = EpochBatchSampler(
        len(datamodule.parts["train"]),
        datamodule.hparams.batch_size,
        shuffle=True,
        seed=datamodule.hparams.seed,
        rank=rank,
        world_size=WORLD,
    )
    sampler.set_epoch(epoch)
    samples = SplitSamples(datamodule, "train", train=True)
    return torch.cat([samples[(epoch, index)][0] for index in sampler])


def test_two_ranks_train_on_disjoint_shards_covering_the_split(
    contract: dict, tmp_path: Path
) -> None:
    log = tmp_path / "ddp.log"
    process = launch_train(
        log, "trainer=ddp_cpu", "trainer.max_epochs=1", "callbacks.progress_bar=null",
        "trainer.precision=32-true", *contract["data_args"], *probe(tmp_path / "probe"),
        f"paths.root_dir={tmp_path}",
    )  # fmt: skip
    finish([process], [log])
    datamodule = built_datamodule(contract)
    seen = [torch.load(tmp_path / "probe" / f"inputs_rank{r}_epoch0.pt") for r in range(WORLD)]
    for rank in range(WORLD):  # exactly its own shard: not all the data, not sharded twice
        assert torch.equal(seen[rank], expected_shard(datamodule, rank, 0)), rank
    size = len(datamodule.parts["train"])
    samplers = [
        EpochBatchSampler(size, 8, shuffle=True, seed=0, rank=rank, world_size=WORLD)
        for rank in range(WORLD)
    ]
    shards = [set(torch.cat(list(sampler)).tolist()) for sampler in samplers]
    assert shards[0] | shards[1] == set(range(len(datamodule.parts["train"])))
    assert len(shards[0] & shards[1]) <= 1  # one padding row at most when the split is odd


# ---- a plain LightningDataModule ---------------------------------------------------------

TRUST_PLAIN = "trusted_classes=[plain_datamodule.PlainBlobs]"  # outside the package
PLAIN = [
    TRUST_PLAIN,
    *QUICK,
    "data._target_=plain_datamodule.PlainBlobs",
    "~data.eval_batch_size",
    "~data.val_fraction",
    "~data.test_fraction",
    "~data.num_workers",
    "~data.normalize",
    "model=mlp",
    "trainer.max_epochs=2",
    "trainer.precision=32-true",
]


def test_plain_datamodule_trains_evaluates_and_exports_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        metrics = train.train(compose_config(tmp_path / "run", PLAIN))
    warnings = [r.getMessage() for r in caplog.records if "not a BaseDataModule" in r.getMessage()]
    assert len(warnings) == 1
    assert "no exact mid-epoch resume" in warnings[0]
    assert "export checks parity on its test batches" in warnings[0]
    assert metrics["test"]["test/acc"] > 0.8

    checkpoint = metrics["best_checkpoint"]
    evaluate = module("eval").evaluate
    refused = compose_config(tmp_path / "eval", [f"ckpt_path={checkpoint}"], config_name="eval")
    with pytest.raises(module("cli.errors").UserError, match="not a class defined under"):
        evaluate(refused)  # the module lives outside the package: named explicitly below
    allowed = [f"ckpt_path={checkpoint}", TRUST_PLAIN]
    # The same precision as the training run, whatever auto picks on this CPU.
    same_precision = [*allowed, "trainer.precision=32-true"]
    scores = evaluate(compose_config(tmp_path / "eval2", same_precision, config_name="eval"))
    assert scores["test"] == pytest.approx(metrics["test"], abs=1e-6)
    report = export.export(
        compose_config(tmp_path / "export", [*allowed, "repeats=1"], config_name="export")
    )
    assert report["inputs"][0]["shape"] == ["batch", 4]  # read from a batch
    assert all(row["classes_agree"] for row in report["parity"])


def test_plain_datamodule_is_sharded_by_lightning_under_ddp(tmp_path: Path) -> None:
    log = tmp_path / "ddp.log"
    process = launch_train(
        log, "trainer=ddp_cpu", "callbacks.progress_bar=null", *PLAIN, "trainer.max_epochs=1",
        *probe(tmp_path / "probe"), f"paths.root_dir={tmp_path}",
    )  # fmt: skip
    finish([process], [log])
    seen = [torch.load(tmp_path / "probe" / f"inputs_rank{r}_epoch0.pt") for r in range(WORLD)]
    rows = [set((inputs[:, 3] * 1000).round().long().tolist()) for inputs in seen]
    assert len(rows[0]) == len(rows[1]) == 80  # 160 train rows, half each
    assert not rows[0] & rows[1]
