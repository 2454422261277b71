"""Sweeps: Optuna trials are ordinary train runs, shared by parallel workers through one
study that survives a killed worker; bad trials are pruned; the best is printed and written."""

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from support import (
    QUICK,
    compose_config,
    module,
    read_json,
    run_cli,
    start_cli,
)

UserError = module("_errors").UserError
# Two short epochs of a few batches per trial.
TINY = [*QUICK, "debug=limit", "trainer.max_epochs=2"]
# Heartbeats fast enough that a killed worker's trial is found lost within seconds.
QUICK_LOSS = ["sweep.heartbeat_s=0.5", "sweep.stale_after_s=3"]
# val/acc never exceeds 1, so every trial is pruned after its first epoch.
PRUNE_ALL = ["~sweep.pruner", "+sweep.pruner={_target_:optuna.pruners.ThresholdPruner,lower:1.01}"]
PARAMS = {
    "optimizer.lr",
    "optimizer.weight_decay",
    "data.batch_size",
    "model.net.dropout",
}


def study_dir(root: Path, name: str = "optuna") -> Path:
    return root / "outputs" / "train" / "sweeps" / name


def load(root: Path, name: str = "optuna") -> optuna.Study:
    url = f"sqlite:///{study_dir(root, name) / 'study.db'}"
    # The sweep creates the tables; a reader creating them too would race it.
    storage = optuna.storages.RDBStorage(url, skip_table_creation=True)
    return optuna.load_study(study_name=name, storage=storage)


def states(study: optuna.Study) -> list[str]:
    return [trial.state.name for trial in study.get_trials()]


def sweep_process(*overrides: str, cwd: Path) -> Any:
    """``python -m <package>.sweep overrides...`` started in the background (warm, as
    ``start_cli``), stdout and stderr together."""
    return start_cli("sweep", *overrides, cwd=cwd, stderr=subprocess.STDOUT)


def running_trial(root: Path, timeout: float = 240) -> Any:
    """Wait for a trial that has run for at least a moment (a heartbeat after its start)."""
    deadline = time.monotonic() + timeout
    log = study_dir(root) / "sweep.log"
    while time.monotonic() < deadline:
        time.sleep(0.2)
        # Read the study only once a trial has started: it exists by then.
        if not log.exists() or " started (worker " not in log.read_text():
            continue
        for trial in load(root).get_trials(states=(TrialState.RUNNING,)):
            run_dir = Path(root, trial.user_attrs.get("run_dir", "-"))
            if (run_dir / "config.yaml").exists():  # training has begun
                return trial
    raise AssertionError("no trial started")


def test_search_space_reads_hydra_ranges() -> None:
    space = module("sweeps._space")
    params = space.parse_space({
        "optimizer.lr": "tag(log, interval(0.0003, 0.01))",
        "model.net.dropout": "interval(0.0, 0.3)",
        "trainer.max_epochs": "int(interval(5, 20))",
        "model.net.depth": "range(2, 6)",
        "data.batch_size": "choice(32, 64, 128)",
    })  # fmt: skip
    assert [(p.key, p.distribution) for p in params] == [
        ("optimizer.lr", FloatDistribution(0.0003, 0.01, log=True)),
        ("model.net.dropout", FloatDistribution(0.0, 0.3)),
        ("trainer.max_epochs", IntDistribution(5, 20)),
        ("model.net.depth", IntDistribution(2, 5)),
        ("data.batch_size", CategoricalDistribution([32, 64, 128])),
    ]
    flat = space.flat_params({"a.b": "choice(1, 2)", "model": {"net": {"width": "choice(3)"}}})
    assert flat == {"a.b": "choice(1, 2)", "model.net.width": "choice(3)"}
    assert space.as_override("x", 1e-05) == "x=1e-05"
    assert space.as_override("x", "it's") == "x='it\\'s'"
    for text in ("0.1", "interval(0.1)", "tag(log, interval(0.0, 1.0))"):
        with pytest.raises(UserError, match=r"^sweep\.params\.lr=.* is not a search range"):
            space.parse_space({"lr": text})


def test_a_range_on_the_command_line_replaces_adds_or_drops_a_searched_key() -> None:
    """Each key of the shipped search is an override path, its range typed as it is written
    in the YAML (unquoted: Hydra would take it as a sweep of its own)."""
    config, space = module("sweeps._config"), module("sweeps._space")
    argv = [
        "sweep.params.optimizer.lr=tag(log, interval(1e-4, 0.1))",
        "+sweep.params.trainer.max_epochs=int(interval(5, 20))",
        "~sweep.params.data",
    ]
    cfg = config.compose_train(config.with_search(config.quoted_ranges(argv)))
    searched = {
        p.key: p.distribution for p in space.parse_space(space.flat_params(cfg.sweep.params))
    }
    assert searched == {
        "optimizer.lr": FloatDistribution(1e-4, 0.1, log=True),
        "optimizer.weight_decay": FloatDistribution(0.0, 0.1),
        "model.net.dropout": FloatDistribution(0.0, 0.3),
        "trainer.max_epochs": IntDistribution(5, 20),
    }
    assert config.quoted_ranges(["seed=1", "sweep.params.x='choice(1)'"]) == [
        "seed=1", "sweep.params.x='choice(1)'",
    ]  # fmt: skip


@pytest.mark.slow
def test_mistakes_stop_the_sweep_with_one_line_before_any_trial(tmp_path: Path) -> None:
    sweep = module("sweep").sweep
    root = f"paths.root_dir={tmp_path}"
    cases = {
        ("+sweep.params.optimizer.lrr='interval(0.1, 0.2)'",): r"key optimizer\.lrr "
        r"is not a key of the train config .*did you mean: optimizer\.lr",
        ("sweep.study=../x",): r"sweep\.study=\.\./x is not a plain name",
        ("sweep.n_trials=0",): r"sweep\.n_trials=0 must be a positive number",
        ("sweep.heartbeat_s=60", "sweep.stale_after_s=60"): r"must exceed twice",
        ("sweep.sampler._target_=optuna.samplers.Nope",): r"sweep\.sampler cannot be built",
        ("sweep.sampler=null",): r"sweep\.sampler is null; name a sampler",
        ("--multirun",): r"--multirun is not an option of sweep",
        ("trainer=ddp_cpu",): r"trainer\.devices=2, num_nodes=1, strategy=.*DDPStrategy: a sweep "
        r"trial trains on one device",
    }
    for overrides, message in cases.items():
        with pytest.raises(UserError, match=message) as raised:
            sweep([*overrides, root])
        assert "\n" not in str(raised.value)
    assert not (tmp_path / "outputs").exists()  # nothing written before the checks pass


def test_bad_storage_is_one_line() -> None:
    storage = module("sweeps._storage")
    with pytest.raises(UserError, match=r"^sweep\.storage=ftp:x is not a storage; use sqlite"):
        storage.open_storage("ftp:x", Path("."), create=True)
    assert storage.describe("postgresql://me:secret@db/x", Path(".")) == "postgresql://db/x"


@pytest.mark.slow
def test_pruning_callback_stops_the_run_cleanly(tmp_path: Path) -> None:
    study = optuna.create_study(
        direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=1.01)
    )
    trial = study.ask()
    pruning = module("sweeps._pruning").PruneBadTrials(trial, "val/acc")
    cfg = compose_config(tmp_path, [*TINY, "trainer.max_epochs=3"])
    metrics = module("train").train(cfg, callbacks=[pruning])
    assert pruning.pruned_epoch == 0
    assert metrics["epochs"] == 1  # stopped after the first of three epochs
    assert (tmp_path / "metrics.json").is_file()
    assert metrics["best_checkpoint"]
    study.tell(trial, state=TrialState.PRUNED)
    [frozen] = study.trials
    assert frozen.state == TrialState.PRUNED
    assert frozen.intermediate_values == {0: pytest.approx(metrics["best"]["val/acc"])}


@pytest.mark.slow
def test_two_workers_share_one_study(tmp_path: Path) -> None:
    result = run_cli("sweep", "sweep.workers=2", "sweep.n_trials=4", *TINY, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    study = load(tmp_path)
    assert states(study) == ["COMPLETE"] * 4
    trials = study.get_trials()
    assert len({tuple(sorted(t.params.items())) for t in trials}) == 4  # no draw repeated
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both workers ran trials
    for trial in trials:
        run_dir = tmp_path / trial.user_attrs["run_dir"]
        assert run_dir.name == f"trial_{trial.number}"
        metrics = read_json(run_dir / "metrics.json")
        assert metrics["best"]["val/acc"] == pytest.approx(trial.value)
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert config["data"]["batch_size"] == trial.params["data.batch_size"]
        assert config["optimizer"]["lr"] == trial.params["optimizer.lr"]

    best = read_json(study_dir(tmp_path) / "best.json")
    assert best["best"]["trial"] == study.best_trial.number
    assert best["best"]["value"] == pytest.approx(study.best_value, abs=1e-6)
    assert best["best"]["params"] == study.best_params
    assert set(best["best"]["params"]) == PARAMS
    assert best["trials"] == {"complete": 4, "pruned": 0, "fail": 0, "running": 0}
    assert f"best trial {study.best_trial.number}: monitor {study.best_value:.4f}\n" in output
    lr = study.best_params["optimizer.lr"]
    width = max(map(len, PARAMS))  # names are aligned in one column
    assert f"  {'optimizer.lr':<{width}}  {lr:.4g}\n" in output
    # Only the sweep's lines: no colour codes, Optuna/alembic/Lightning chatter or progress bars.
    for noise in ("\x1b[", "[I ", "alembic", "Context impl", "A new study", "INFO", "Epoch "):
        assert noise not in output, noise
    assert output.count("finished: monitor") == 4


@pytest.mark.slow
def test_a_killed_worker_loses_only_its_trial(tmp_path: Path) -> None:
    sweep = sweep_process("sweep.workers=2", "sweep.n_trials=4", *QUICK_LOSS, *TINY, cwd=tmp_path)
    victim = running_trial(tmp_path)
    os.kill(int(victim.user_attrs["worker"].rsplit(":", 1)[1]), signal.SIGKILL)
    output, _ = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, output[-3000:]  # the other worker made the budget up
    study = load(tmp_path)
    assert sorted(states(study)) == ["COMPLETE"] * 4 + ["FAIL"]
    assert study.trials[victim.number].state == TrialState.FAIL
    assert (tmp_path / victim.user_attrs["run_dir"] / "config.yaml").is_file()  # left as it was
    assert f"trial {victim.number} lost: no heartbeat" in output
    assert "ended with signal SIGKILL" in output


@pytest.mark.slow
def test_rerunning_resumes_a_killed_sweep(tmp_path: Path) -> None:
    command = ["sweep.n_trials=3", *QUICK_LOSS, *TINY]
    sweep = sweep_process(*command, cwd=tmp_path)
    victim = running_trial(tmp_path)
    sweep.kill()  # the whole sweep, mid-trial
    sweep.wait(timeout=60)
    assert load(tmp_path).trials[victim.number].state == TrialState.RUNNING  # as it was left

    result = run_cli("sweep", *command, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    study = load(tmp_path)
    assert sorted(states(study)) == ["COMPLETE"] * 3 + ["FAIL"]
    assert study.trials[victim.number].state == TrialState.FAIL
    assert f"trial {victim.number} lost" in result.stdout

    again = run_cli(
        "sweep", "sweep.n_trials=4", "data.batch_size=32", *QUICK_LOSS, *TINY, cwd=tmp_path
    )
    assert again.returncode == 1
    assert "was started with overrides" in again.stderr + again.stdout


@pytest.mark.slow
def test_pruned_trials_are_marked_and_keep_their_runs(tmp_path: Path) -> None:
    # In a journal file, the storage for workers on many machines.
    overrides = ["sweep.n_trials=2", "sweep.storage=journal", *PRUNE_ALL, *TINY]
    result = run_cli("sweep", *overrides, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    journal = JournalFileBackend(str(study_dir(tmp_path) / "study.journal"))
    study = optuna.load_study(study_name="optuna", storage=JournalStorage(journal))
    assert states(study) == ["PRUNED", "PRUNED"]
    for trial in study.trials:
        assert list(trial.intermediate_values) == [0]
        metrics = read_json(tmp_path / trial.user_attrs["run_dir"] / "metrics.json")
        assert metrics["epochs"] == 1  # of 2: stopped after the first
    assert result.stdout.count("pruned after epoch 0") == 2
    assert read_json(study_dir(tmp_path) / "best.json")["best"] is None
    assert "no trial has completed yet" in result.stdout


@pytest.mark.slow
def test_grid_multirun_gives_each_combination_a_run(tmp_path: Path) -> None:
    result = run_cli("train", "-m", "model=cnn,mlp", *TINY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [sweep_dir] = (tmp_path / "outputs" / "train" / "multiruns").iterdir()
    nets = [
        yaml.safe_load((sweep_dir / job / "config.yaml").read_text())["model"]["net"]["_target_"]
        for job in ("0", "1")
    ]
    assert [net.rsplit(".", 1)[1] for net in nets] == ["SmallCNN", "MLP"]


@pytest.mark.slow
def test_a_seeded_sweep_repeats_its_draws(tmp_path: Path) -> None:
    # One random start, then TPE proper: both draw the same values under the same seed.
    command = ["sweep.n_trials=3", "sweep.sampler.n_startup_trials=1", "seed=3", *TINY]
    draws = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        result = run_cli("sweep", *command, cwd=tmp_path / name)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        study = load(tmp_path / name)
        assert states(study) == ["COMPLETE"] * 3
        draws.append([trial.params for trial in study.trials])
    assert draws[0] == draws[1]
    assert len({tuple(sorted(params.items())) for params in draws[0]}) == 3
