"""Variable-length inputs: what a data module declares, how sequences are read, padded and
checked, and a plain LightningDataModule that pads per batch (the issue's case) trained,
exported and asked for predictions of any allowed length, from files and over HTTP.

The sequence example (``data=sequences``) runs the whole data contract in
test_data_contract.py, padding invariance included.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from plain_datamodule import PlainBlobs, PlainSequences, StreamedSequences
from platekit._errors import UserError
from platekit.data._adapters import data_info
from platekit.data._base import BaseDataModule, Rows
from platekit.data._info import DataInfo
from platekit.data._inputs import read_inputs
from platekit.data._padding import check_sequences, from_json
from platekit.data._sequences import SequenceDataModule
from platekit.models._exportable import RawInputModel
from platekit.models._runners import TorchRunner
from platekit.models._sequence import SequenceGRU
from platekit.training._header import data_shape

from support import QUICK, compose_config, module

TOKENS = DataInfo(
    input_shape=(40,),
    target_kind="class",
    class_names=("a", "b", "c"),
    varying_axes={0: 40},
    padding_value=0.0,
    vocab_size=13,
)
VECTORS = DataInfo(  # sequences of 3-feature steps, no length limit
    input_shape=(10, 3), target_kind="value", varying_axes={0: None}, padding_value=-1.0
)


# ---- what a data module declares --------------------------------------------------------


def test_a_plain_modules_shape_comes_from_its_declaration_not_a_batch() -> None:
    info = data_info(PlainSequences(batch_size=2))
    assert info.input_shape == (40,)  # the declared maximum, not a shuffled batch's length
    assert info.varying_axes == {0: 40}
    assert (info.padding_value, info.vocab_size) == (0.0, 13)
    assert info.input_description.startswith("float32 (N, L<=40)")
    assert data_shape(info) == "inputs L<=40, 3 classes"  # the run header's line


def test_a_plain_fixed_size_modules_shape_comes_from_its_first_item() -> None:
    info = data_info(PlainBlobs())
    assert (info.input_shape, info.varying_axes) == ((4,), {})


def test_sizes_that_vary_undeclared_are_refused_naming_the_declaration() -> None:
    with pytest.raises(UserError, match=r"differ in size along axis 0 \(sizes \d+ to \d+ among"):
        data_info(PlainSequences(batch_size=2, declare=False))
    with pytest.raises(UserError, match=r"varying_axes = \{0: <largest size, or None>\}"):
        data_info(PlainSequences(batch_size=2, declare=False))


def test_an_iterable_dataset_declaring_nothing_is_refused() -> None:
    with pytest.raises(UserError, match=r"cannot be known .* not map-style.* input_shape"):
        data_info(StreamedSequences(declare=False))


def test_a_declaration_that_does_not_fit_is_refused() -> None:
    bad = PlainSequences()
    bad.varying_axes = {0: 40, 1: 3}  # type: ignore[assignment]
    with pytest.raises(UserError, match="names several axes; one may vary"):
        data_info(bad)


def test_data_info_round_trips_its_varying_axis_through_json() -> None:
    plain = json.loads(json.dumps(TOKENS.to_dict()))
    assert plain["varying_axes"] == {"0": 40}
    assert DataInfo.from_dict(plain) == TOKENS
    with pytest.raises(ValueError, match="padded to 41 along axis 0, over its maximum 40"):
        DataInfo.from_dict({**plain, "input_shape": [41]})


# ---- the sequence example's data module ---------------------------------------------------


def test_the_example_pads_its_sequences_to_the_maximum() -> None:
    datamodule = SequenceDataModule(size=300)
    datamodule.setup()
    inputs = datamodule.raw_inputs("train")
    assert inputs.shape == (len(datamodule.parts["train"]), 40)
    lengths = (inputs != 0).sum(dim=1)
    assert int(lengths.min()) == 5
    assert int(lengths.max()) == 40
    for row, length in zip(inputs, lengths.tolist(), strict=True):  # padding only trails
        assert bool((row[:length] >= 1).all())
        assert bool((row[length:] == 0).all())
    assert int(inputs.max()) == 12
    assert datamodule.info.vocab_size == 13


def test_the_example_refuses_normalising_padding() -> None:
    with pytest.raises(UserError, match=r"padding would enter the statistics; set data\.normalize"):
        SequenceDataModule(size=300, normalize="scalar").setup()


# ---- reading sequences --------------------------------------------------------------------


def test_json_takes_a_list_per_row_or_one_sequence() -> None:
    rows = from_json([[3, 1, 4], [1, 5, 9, 2, 6]], TOKENS, "x")
    np.testing.assert_array_equal(rows, [[3, 1, 4, 0, 0], [1, 5, 9, 2, 6]])
    np.testing.assert_array_equal(from_json([7, 8], TOKENS, "x"), [[7, 8]])
    vectors = from_json([[[1, 2, 3]], [[4, 5, 6], [7, 8, 9]]], VECTORS, "x")
    np.testing.assert_array_equal(vectors[0], [[1, 2, 3], [-1, -1, -1]])
    assert from_json([[[0, 0, 0]] * 60], VECTORS, "x").shape == (1, 60, 3)  # no limit


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1] * 41], "row 0 has length 41, over the model's maximum 40"),
        ([[1, 2], [1, 0, 3]], "row 1 step 1 equals the padding value 0 inside its length 3"),
        ([[1, 13]], "row 0 holds token 13; token ids are whole numbers 0..12"),
        ([[1, 2.5]], "row 0 holds token 2.5"),
        ([[1], []], "row 1 has shape"),
        ([[1, "a"]], "row 0 is not a sequence of numbers"),
        ([[[1]]], "row 0 has shape"),
        ({"a": 1}, "is not a non-empty list of sequences"),
    ],
)
def test_bad_sequences_are_one_clear_error(rows: Any, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(".", r"\.")):
        from_json(rows, TOKENS, "x")


def test_an_npz_of_padded_sequences_with_lengths_ignores_what_lies_past_them(
    tmp_path: Path,
) -> None:
    padded = np.array([[5, 6, 7, 9, 9], [4, 9, 9, 9, 9]], dtype=np.int64)  # 9: junk past the end
    np.savez(tmp_path / "x.npz", inputs=padded, lengths=np.array([3, 1]))
    np.save(tmp_path / "y.npy", np.array([[4, 0, 0, 0, 0, 0, 0]], dtype=np.float32))
    json_path = tmp_path / "z.json"
    json_path.write_text("[[1, 2, 3, 4, 5, 6]]")
    inputs, names = read_inputs([tmp_path / "x.npz", tmp_path / "y.npy", json_path], TOKENS)
    np.testing.assert_array_equal(
        inputs, [[5, 6, 7, 0, 0, 0], [4, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]]
    )
    assert inputs.dtype == np.float32
    assert names[-1] == f"{json_path}[0]"


def test_sequence_files_that_cannot_be_read_safely_are_refused(tmp_path: Path) -> None:
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = [1, 2], [3]
    np.savez(tmp_path / "pickled.npz", inputs=ragged, lengths=np.array([2, 1]))
    with pytest.raises(UserError, match="cannot be read safely as numpy arrays"):
        read_inputs([tmp_path / "pickled.npz"], TOKENS)
    np.savez(tmp_path / "short.npz", inputs=np.ones((2, 3)), lengths=np.array([3, 4]))
    with pytest.raises(UserError, match="row 1 has length 4, more than the 3 steps"):
        read_inputs([tmp_path / "short.npz"], TOKENS)
    np.savez(tmp_path / "two.npz", a=np.ones((2, 3)), b=np.ones((2, 3)))
    with pytest.raises(UserError, match=r"np\.savez\(path, inputs=padded, lengths=lengths\)"):
        read_inputs([tmp_path / "two.npz"], TOKENS)


def test_a_padded_array_gets_its_lengths_from_the_padding() -> None:
    padded = np.array([[1, 2, 0, 0], [3, 0, 0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(check_sequences(padded, None, TOKENS, "x"), [[1, 2], [3, 0]])
    with pytest.raises(UserError, match="row 0 is an empty sequence"):
        check_sequences(np.zeros((1, 4), np.float32), None, TOKENS, "x")


# ---- the net: padding never changes an answer ---------------------------------------------


@pytest.mark.parametrize("info", [TOKENS, VECTORS], ids=["tokens", "vectors"])
def test_the_sequence_net_answers_the_same_however_far_a_sequence_is_padded(
    info: DataInfo,
) -> None:
    torch.manual_seed(0)
    net = SequenceGRU(
        info.input_shape, 3, vocab_size=info.vocab_size, padding_value=info.padding_value or 0.0
    ).eval()
    shape = (7, *info.input_shape[1:])
    sequence = torch.randint(1, 13, shape).float()  # never the padding value
    with torch.no_grad():
        alone = net(sequence[None])
        for total in (8, 40, 64):
            padded = torch.full((1, total, *shape[1:]), float(info.padding_value or 0.0))
            padded[0, :7] = sequence
            torch.testing.assert_close(net(padded), alone, atol=1e-6, rtol=0)
        other = sequence.clone()
        other[-1] = other[-1] % 12 + 1  # a different last step: the net reads to the end
        assert not torch.allclose(net(other[None]), alone)


# ---- a plain module padding per batch, end to end -----------------------------------------

TRUST = "trusted_classes=[plain_datamodule.PlainSequences]"
PLAIN = [
    TRUST,
    *QUICK,
    "data._target_=plain_datamodule.PlainSequences",
    "data.batch_size=2",  # the case: a shuffled pair is as long as its longer item
    "~data.eval_batch_size",
    "~data.val_fraction",
    "~data.test_fraction",
    "~data.num_workers",
    "~data.normalize",
    "model=gru",
    "trainer.max_epochs=2",
    "trainer.precision=32-true",
]


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("plain_sequences")
    metrics = module("train").train(compose_config(root / "run", PLAIN))
    given = [f"ckpt_path={metrics['best_checkpoint']}", TRUST, "repeats=1"]
    report = module("export").export(compose_config(root / "export", given, "export"))
    return {
        "root": root,
        "metrics": metrics,
        "report": report,
        "ckpt": metrics["best_checkpoint"],
        "model": root / "export" / "model.onnx",
    }


@pytest.mark.slow
def test_a_plain_padding_module_trains_and_exports_a_free_length(
    plain_run: dict[str, Any],
) -> None:
    assert plain_run["metrics"]["test"]["test/acc"] > 0.5  # 3 classes: above chance
    card = torch.load(plain_run["ckpt"], weights_only=True)["data"]
    assert card["info"]["input_shape"] == [40]
    assert card["info"]["varying_axes"] == {"0": 40}
    report = plain_run["report"]
    assert report["inputs"][0]["shape"] == ["batch", "length"]
    lengths = {row["input_shape"][0] for row in report["parity"]}
    assert len(lengths) == 2  # checked padded, and each batch at its own longest length
    assert all(row["max_abs_diff"] < 1e-4 and row["classes_agree"] for row in report["parity"])


@pytest.mark.slow
def test_predict_takes_any_allowed_length_with_both_backends(
    plain_run: dict[str, Any], tmp_path: Path
) -> None:
    rows = [[1, 2, 3, 4, 5], list(range(1, 13)) * 3 + [5, 6, 7, 8], [9, 10, 11, 12, 9, 10]]
    assert [len(row) for row in rows] == [5, 40, 6]
    lists = tmp_path / "rows.json"
    lists.write_text(json.dumps(rows))
    padded = np.zeros((3, 40), dtype=np.int64)
    for index, row in enumerate(rows):
        padded[index, : len(row)] = row
    np.savez(tmp_path / "rows.npz", inputs=padded, lengths=np.array([5, 40, 6]))
    answers = []
    for backend in ("ckpt", "model"):
        for path in (lists, tmp_path / "rows.npz"):
            given = [f"model_path={plain_run[backend]}", f"inputs={path}", TRUST]
            predictions = module("predict").predict(
                compose_config(tmp_path / backend, given, "predict")
            )
            answers.append([(p["class"], p["probability"]) for p in predictions])
    for answer in answers[1:]:
        assert [c for c, _ in answer] == [c for c, _ in answers[0]]
        np.testing.assert_allclose([p for _, p in answer], [p for _, p in answers[0]], atol=1e-5)


@pytest.mark.slow
def test_serve_takes_a_list_per_row(plain_run: dict[str, Any]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    bodies = module("commands._serving_bodies")
    runner = module("models._onnx_runner").OnnxRunner(plain_run["model"])
    limits = bodies.Limits(max_body_bytes=1 << 20, max_image_pixels=1 << 20)
    client = TestClient(
        module("commands._serving_app").build_app(runner, plain_run["model"], limits, 64)
    )
    assert client.get("/metadata").json()["varying_axes"] == {"0": 40}
    headers = {"content-type": "application/json"}
    answer = client.post("/predict", content="[[1, 2, 3, 4, 5], [9, 10, 11]]", headers=headers)
    assert answer.status_code == 200, answer.text
    predictions = answer.json()["predictions"]
    assert [p["input"] for p in predictions] == ["body[0]", "body[1]"]
    alone = client.post("/predict", content="[9, 10, 11]", headers=headers).json()
    assert alone["predictions"][0]["probabilities"] == pytest.approx(
        predictions[1]["probabilities"], abs=1e-6
    )
    too_long = client.post("/predict", content=json.dumps([[1] * 41]), headers=headers)
    assert too_long.status_code == 400
    assert "row 0 has length 41, over the model's maximum 40" in too_long.json()["error"]


@pytest.mark.slow
def test_a_plain_module_that_declares_nothing_stops_before_training(tmp_path: Path) -> None:
    undeclared = [*PLAIN, "+data.declare=false"]
    with pytest.raises(UserError, match="differ in size along axis 0"):
        module("train").train(compose_config(tmp_path / "run", undeclared))
    assert not list(tmp_path.rglob("*.ckpt"))


# ---- vectors per step, no length limit ----------------------------------------------------


class Walks(BaseDataModule):
    """Random walks of 3-feature steps, 4 to 30 steps each, padded with -1 (never a step)."""

    padding_value = -1.0

    def varying_axes(self) -> dict[int, int | None]:
        return {0: None}  # any length

    def read(self) -> Rows:
        generator = torch.Generator().manual_seed(0)
        lengths = torch.randint(4, 31, (120,), generator=generator).tolist()
        walks = [torch.rand(n, 3, generator=generator).cumsum(0) for n in lengths]
        labels = torch.tensor([int(walk[-1, 0] > walk[-1, 1]) for walk in walks])
        return Rows(walks, labels, class_names=["x", "y"])


@pytest.mark.slow
def test_vector_steps_with_no_limit_pad_to_the_longest_and_export_a_free_length(
    tmp_path: Path,
) -> None:
    datamodule = Walks(normalize="none")
    datamodule.setup()
    info = datamodule.info
    assert info.input_shape == (30, 3)
    assert info.varying_axes == {0: None}
    raw = datamodule.raw_inputs("test").numpy()
    assert bool((raw[(raw == -1).all(axis=2)] == -1).all())  # padded steps are all padding
    torch.manual_seed(0)
    net = SequenceGRU(info.input_shape, 2, padding_value=-1.0)
    model = RawInputModel(net, datamodule.mean, datamodule.std, "class").eval()
    export_onnx = module("export").export_onnx
    export_onnx(model, torch.from_numpy(raw[:2]), tmp_path / "walks.onnx", 18, info)
    module("export").free_varying_axes(tmp_path / "walks.onnx", info)
    module("export").label_model(tmp_path / "walks.onnx", info, tmp_path / "none.ckpt")
    runner = module("models._onnx_runner").OnnxRunner(tmp_path / "walks.onnx")
    assert runner.session.get_inputs()[0].shape == ["batch", "length", 3]
    longer = from_json([np.cumsum(np.ones((45, 3)), axis=0).tolist()], runner.info, "x")
    assert longer.shape == (1, 45, 3)  # longer than any training walk: no limit declared
    expected = TorchRunner(model, info)(longer)[-1]
    np.testing.assert_allclose(runner(longer)[-1], expected, atol=1e-5)
