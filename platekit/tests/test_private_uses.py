"""Each private name of a library platekit still uses, where no public route exists: it is
still there, with the shape platekit relies on, in the versions installed. An upgrade that
moves one fails here, naming it, not as a silent change of behaviour in a run.

- ``ModelCheckpoint._save_last_checkpoint(trainer, monitor_candidates)``: counted, so that
  ``last.ckpt`` is written once per epoch end (training/_checkpointing.py).
- ``ExperimentWriter._check_log_dir_exists()`` and ``CSVLogger._experiment`` / ``_fs``: a
  resumed run appends to its ``metrics.csv`` (training/_csv_logger.py).
- ``LRScheduler._last_lr``: a re-planned schedule's lr, set on restore (models/_schedules.py).
- ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``: oneDNN's own answer to whether this CPU
  runs bf16 (config/_precision.py); torch has no public one for the CPU.
- the logger ``torch.onnx._internal.exporter._registration``, quieted during export
  (commands/_export.py): a name only, so a rename brings its lines back and breaks nothing.
- the checkpoint's ``loops.fit_loop["epoch_loop.val_loop.batch_progress"]`` counters and
  Lightning's restart "mid-evaluation" that reads them: a validation a stop cut short is
  recorded as started with no batch done, so the resume runs it again in full
  (training/_exact_resume.py); the signal tests check the result end to end.
- uvicorn's ``H11Protocol``: ``connection_made``, ``data_received``, ``connection_lost``,
  ``send_400_response(msg)`` and its ``conn`` (an h11 connection), ``transport``, ``loop``
  and ``client``: the request deadline and JSON errors of the model server
  (commands/_serving_protocol.py). uvicorn has no public hook for either.
"""

import importlib.util
import inspect

import pytest
import torch
from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from platekit.training import PreemptibleCheckpoint, ResumableCSVLogger


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_lightnings_private_methods_platekit_overrides_are_still_there() -> None:
    assert parameters(ModelCheckpoint._save_last_checkpoint) == [
        "self", "trainer", "monitor_candidates",
    ]  # fmt: skip
    assert parameters(ExperimentWriter._check_log_dir_exists) == ["self"]
    # the overrides override them (not a method of their own beside Lightning's)
    assert "_save_last_checkpoint" in vars(PreemptibleCheckpoint)
    assert "setup" in vars(PreemptibleCheckpoint)  # public: the warning it filters is tested
    logger = CSVLogger("unused")
    assert hasattr(logger, "_experiment")
    assert hasattr(logger, "_fs")
    assert issubclass(ResumableCSVLogger, CSVLogger)


def test_a_validation_recorded_as_just_started_restarts_mid_evaluation() -> None:
    """Lightning's loop state as ``validate_again`` writes it: the counters are where it
    looks and its restart reads them as a validation to run (from its first batch)."""
    from lightning.pytorch.loops.evaluation_loop import RestartStage, _EvaluationLoop
    from lightning.pytorch.loops.fit_loop import _FitLoop

    from platekit.training._exact_resume import VALIDATION_PROGRESS, validate_again

    trainer = Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    fit_loop = trainer.fit_loop
    assert isinstance(fit_loop, _FitLoop)
    assert VALIDATION_PROGRESS[2] in fit_loop.state_dict()
    fit_loop.epoch_progress.increment_ready()  # an epoch under way ...
    fit_loop.epoch_progress.increment_started()
    fit_loop.epoch_loop.val_loop.batch_progress.increment_by(3)  # ... its validation 3 batches in
    checkpoint = {"loops": {"fit_loop": fit_loop.state_dict()}}
    validate_again(checkpoint)
    val_loop = fit_loop.epoch_loop.val_loop
    assert isinstance(val_loop, _EvaluationLoop)
    fit_loop.load_state_dict(checkpoint["loops"]["fit_loop"])  # sets it restarting
    val_loop.update_restart_stage()
    assert val_loop._restart_stage == RestartStage.RESTARTED_MID_EVALUATION
    val_loop.batch_progress.reset_on_restart()
    assert val_loop.batch_progress.current.ready == 0  # from the first batch


def test_torchs_last_lr_is_what_get_last_lr_returns() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scheduler._last_lr = [0.25]
    assert scheduler.get_last_lr() == [0.25]


def test_uvicorns_h11_protocol_has_what_the_servers_deadline_uses() -> None:
    pytest.importorskip("uvicorn")
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from platekit.commands._serving_protocol import DeadlineProtocol

    assert parameters(H11Protocol.connection_made) == ["self", "transport"]
    assert parameters(H11Protocol.data_received) == ["self", "data"]
    assert parameters(H11Protocol.connection_lost) == ["self", "exc"]
    assert parameters(H11Protocol.send_400_response) == ["self", "msg"]
    source = inspect.getsource(H11Protocol)
    for attribute in (
        "self.conn = h11.Connection",
        "self.transport = ",
        "self.loop = ",
        "self.client = ",
    ):
        assert attribute in source, attribute
    assert "self.send_400_response(msg)" in source  # what it calls on a request h11 refuses
    for method in ("connection_made", "data_received", "connection_lost", "send_400_response"):
        assert method in vars(DeadlineProtocol), method


def test_torchs_cpu_bf16_probe_is_there_and_answers_a_bool() -> None:
    assert isinstance(torch.ops.mkldnn._is_mkldnn_bf16_supported(), bool)


def test_the_quieted_onnx_exporter_logger_is_a_module_of_this_torch() -> None:
    assert importlib.util.find_spec("torch.onnx._internal.exporter._registration") is not None
