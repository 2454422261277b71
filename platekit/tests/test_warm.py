"""A command forked warm (warm.py) runs as the same command started cold would."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import warm

from support import cli_env

PROBE = """
import json, os, sys
import torch
print(json.dumps({"argv": sys.argv[1:], "path": sys.path[:2], "cwd": os.getcwd(),
                  "name": __name__, "spec": __spec__.name, "marker": os.environ.get("MARKER"),
                  "seed": torch.initial_seed()}))
print("to stderr\\r\\nand on", file=sys.stderr)
if sys.argv[2] == "term":
    os.kill(os.getpid(), 15)
sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else 0)
"""


@pytest.fixture
def probe(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "warm_probe.py").write_text(PROBE)
    return tmp_path, {**cli_env(), "PYTHONPATH": str(tmp_path / "lib"), "MARKER": "given"}


def test_this_worker_has_a_warm_process() -> None:
    """Its imports warned of nothing and started no thread: the suite's commands fork from it
    (a library that starts a thread at import would make every command start cold)."""
    assert warm._warm_for(cli_env()) is not None


@pytest.mark.parametrize("code", ["0", "3", "term"])
def test_warm_and_cold_run_a_module_alike(
    probe: tuple[Path, dict[str, str]], code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, env = probe
    args = ["-m", "warm_probe", "given", code]
    hot = warm.run(args, folder, env)
    monkeypatch.setenv(warm.COLD, "1")
    cold = warm.run(args, folder, env)
    assert hot.returncode == cold.returncode == {"0": 0, "3": 3, "term": -signal.SIGTERM}[code]
    assert hot.stderr == cold.stderr == "to stderr\nand on\n"
    said, cold_said = json.loads(hot.stdout), json.loads(cold.stdout)
    assert said["seed"] != cold_said["seed"]  # each process draws its own
    del said["seed"], cold_said["seed"]
    assert (
        said
        == cold_said
        == {
            "argv": ["given", code],
            "path": [str(folder), str(folder / "lib")],
            "cwd": str(folder),
            "name": "__main__",
            "spec": "warm_probe",
            "marker": "given",
        }
    )
    assert hot.args == cold.args == [sys.executable, *args]


def test_two_warm_children_draw_their_own_seeds(probe: tuple[Path, dict[str, str]]) -> None:
    folder, env = probe
    seeds = {json.loads(warm.run(["-m", "warm_probe", "0", "0"], folder, env).stdout)["seed"]}
    seeds.add(json.loads(warm.run(["-m", "warm_probe", "0", "0"], folder, env).stdout)["seed"])
    assert len(seeds) == 2


def test_a_relative_folder_is_the_test_processes_and_a_new_session_is_made_before_the_pid(
    probe: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, env = probe
    (folder / "sub").mkdir()
    monkeypatch.chdir(folder)
    said = json.loads(warm.run(["-m", "warm_probe", "given", "0"], Path("sub"), env).stdout)
    assert said["cwd"] == said["path"][0] == str(folder / "sub")
    process = warm.start(["-m", "warm_probe", "given", "0"], folder, env, start_new_session=True)
    assert os.getpgid(process.pid) == process.pid  # killpg at once reaches it alone
    process.communicate(timeout=60)


def test_a_lost_warm_process_is_an_error_and_its_command_is_stopped(
    probe: tuple[Path, dict[str, str]],
) -> None:
    folder, env = probe
    (folder / "lib" / "warm_sleep.py").write_text("import time\ntime.sleep(60)\n")
    lost = warm._Warm(env)  # one of this test's own, not the worker's
    process = warm.WarmProcess(lost, ["-m", "warm_sleep"], folder, env, subprocess.PIPE, False)
    lost.process.kill()
    with pytest.raises(RuntimeError, match="the warm process ended before sending an exit"):
        process.wait(timeout=60)
    time.sleep(0.5)
    assert (
        not Path(f"/proc/{process.pid}").exists()
        or "Z" in Path(f"/proc/{process.pid}/stat").read_text().split(")")[1][:3]
    )
