"""The data contract (platekit.testing.DataContract) on platekit's own data modules, and what
a plain LightningDataModule (plain_datamodule.py) still gets: it trains, shards and warns.

A project runs the contract over every one of its configs/data/*.yaml (its
tests/test_data_contract.py); here it runs on the data configs whose module is platekit's
(CSV with class and real-valued targets, the image folder with augmentation and workers).
"""

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning import Callback

from platekit.testing import CrashError, DataContract, finish, launch_train, probe

from support import CONFIG_DIR, QUICK, cli_env, compose_config, module

train = module("train")
export = module("export")
WORLD = 2


def kit_data_configs() -> list[str]:
    """The data configs naming one of platekit's data modules."""
    return sorted(
        path.stem
        for path in (CONFIG_DIR / "data").glob("*.yaml")
        if str(compose_config(Path("/unused"), [f"data={path.stem}"]).data._target_).startswith(
            "platekit."
        )
    )


class TestPlatekitDataContract(DataContract):
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "data_config" in metafunc.fixturenames:
            names = kit_data_configs()
            metafunc.parametrize("data_config", names, ids=names, scope="class")


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


class RowsSeen(Callback):
    """Records, per epoch, the rows of every training batch (PlainBlobs' last feature)."""

    seen: dict[int, list[int]] = {}  # noqa: RUF012  (shared by the runs of one test)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        rows = (batch[0][:, 3] * 1000).round().long().tolist()
        RowsSeen.seen.setdefault(trainer.current_epoch, []).extend(rows)


@pytest.mark.slow
def test_a_plain_datamodule_resumed_mid_epoch_replays_some_rows_and_skips_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What the plain module's warning says: the step continues, the loader starts over."""
    rows = [
        "trusted_classes=[plain_datamodule.PlainBlobs,test_data_contract.RowsSeen]",
        "+callbacks.rows._target_=test_data_contract.RowsSeen",
        "callbacks.model_checkpoint.last_every_n_steps=1",
        "callbacks.early_stopping=null",
    ]
    plain = [*PLAIN[1:], *rows]  # 160 train rows in batches of 64: 3 steps an epoch
    crash = ["+callbacks.crash._target_=platekit.testing.CrashAfter", "+callbacks.crash.step=5"]
    RowsSeen.seen = {}
    with pytest.raises(CrashError):
        train.train(compose_config(tmp_path, [*plain, *crash]))
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 4  # epoch 1, one batch done
    first_leg = list(RowsSeen.seen[1][:64])  # the batch the checkpoint holds
    RowsSeen.seen = {}
    with caplog.at_level(logging.WARNING):
        train.train(
            compose_config(tmp_path, [*plain, f"ckpt_path={tmp_path}/checkpoints/last.ckpt"])
        )
    assert "continues at the checkpoint's step with the loader started over" in caplog.text
    second_leg = RowsSeen.seen[1]
    assert len(second_leg) == 2 * 64  # two more steps: the epoch's count, as the step says
    epoch = first_leg + second_leg  # 192 rows drawn for an epoch of 160
    assert len(set(epoch)) < 160  # some rows never trained on in that epoch
    assert len(epoch) - len(set(epoch)) > 32  # some twice, not only the short last batch's


@pytest.mark.slow
def test_plain_datamodule_trains_evaluates_and_exports_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        metrics = train.train(compose_config(tmp_path / "run", PLAIN))
    warnings = [r.getMessage() for r in caplog.records if "not a BaseDataModule" in r.getMessage()]
    assert len(warnings) == 1
    assert (
        "resumed mid-epoch continues at the checkpoint's step with the loader started over"
        in warnings[0]
    )
    assert "export checks parity on its test batches" in warnings[0]
    assert metrics["test"]["test/acc"] > 0.8

    checkpoint = metrics["best_checkpoint"]
    evaluate = module("eval").evaluate
    refused = compose_config(tmp_path / "eval", [f"ckpt_path={checkpoint}"], config_name="eval")
    with pytest.raises(module("_errors").UserError, match="not a class defined under"):
        evaluate(refused)  # the module lives outside the package: named explicitly below
    allowed = [f"ckpt_path={checkpoint}", TRUST_PLAIN]
    same_precision = [*allowed, "trainer.precision=32-true"]  # as it trained (auto may be bf16)
    scores = evaluate(compose_config(tmp_path / "eval2", same_precision, config_name="eval"))
    assert scores["test"] == pytest.approx(metrics["test"], abs=1e-6)
    report = export.export(
        compose_config(tmp_path / "export", [*allowed, "repeats=1"], config_name="export")
    )
    assert report["inputs"][0]["shape"] == ["batch", 4]  # its first item's shape
    assert all(row["classes_agree"] for row in report["parity"])


@pytest.mark.slow
def test_plain_datamodule_is_sharded_by_lightning_under_ddp(tmp_path: Path) -> None:
    log = tmp_path / "ddp.log"
    process = launch_train(
        log, "trainer=ddp_cpu", "callbacks.progress_bar=null", *PLAIN, "trainer.max_epochs=1",
        *probe(tmp_path / "probe"), f"paths.root_dir={tmp_path}", env=cli_env(),
    )  # fmt: skip
    finish([process], [log])
    seen = [torch.load(tmp_path / "probe" / f"inputs_rank{r}_epoch0.pt") for r in range(WORLD)]
    rows = [set((inputs[:, 3] * 1000).round().long().tolist()) for inputs in seen]
    assert len(rows[0]) == len(rows[1]) == 80  # 160 train rows, half each
    assert not rows[0] & rows[1]
