"""`make lock` lists the direct pins a minor release or more behind the package index's
newest, and names those held back on purpose with the reason their comment gives."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = (
    Path(__file__).resolve().parents[1] / "{{cookiecutter.project_slug}}" / "scripts" / "lock.py"
)


def lock_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("baked_lock", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["baked_lock"] = module
    spec.loader.exec_module(module)
    return module


def test_outdated_pins_are_listed_and_held_ones_give_their_reason(tmp_path: Path) -> None:
    lock = lock_script()
    newest = lock.newest("pytest")
    if newest is None:
        pytest.skip("the package index cannot be reached")
    old = f"{int(newest.split('.')[0]) - 1}.0.0"  # a major release behind
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\ndependencies = [\n    "pytest=={old}",\n'
        f'    "pytest-xdist==1.0.0",  # held back: a test of the reason\n'
        f'    "no-such-package-torchplate-test==1.0.0",\n]\n\n'
        f'[dependency-groups]\ndev = [\n    "pip=={lock.newest("pip")}",\n]\n'
    )
    lines = lock.outdated(tmp_path)
    assert lines[0].startswith("pins behind the newest release")
    assert f"  pytest=={old} (newest {newest})" in lines
    held = lines.index("held back on purpose:")
    assert lines[held + 1].startswith("  pytest-xdist==1.0.0 (newest ")
    assert lines[held + 1].endswith("): a test of the reason")
    assert (
        lines[-1] == "not checked (not on the index, or offline): no-such-package-torchplate-test"
    )
    assert not any(line.startswith("  pip==") for line in lines)  # the newest is not listed


def test_every_held_back_pin_of_the_bake_gives_a_reason() -> None:
    lock = lock_script()
    pins = lock.direct_pins(SCRIPT.parents[1])
    held = {name: reason for name, (_, reason) in pins.items() if reason}
    assert set(held) == {"torch", "omegaconf"}
    assert "hydra-core 1.3.8 requires omegaconf<2.4" in held["omegaconf"]
    assert "CPU build" in held["torch"]


def test_a_release_younger_than_a_week_is_not_proposed() -> None:
    lock = lock_script()
    from datetime import UTC, datetime, timedelta

    today = lock.newest("pip")
    if today is None:
        pytest.skip("the package index cannot be reached")
    # Seen from a date before pip's newest release settled, that release is not proposed.
    import json
    import urllib.request

    request = urllib.request.Request(
        "https://pypi.org/simple/pip/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    uploaded = min(
        datetime.fromisoformat(f["upload-time"])
        for f in files
        if lock.file_version(f["filename"]) == today
    )
    before = lock.newest("pip", now=uploaded + timedelta(days=6))
    assert before is not None and before != today
    assert lock.newest("pip", now=uploaded + timedelta(days=7, minutes=1)) == today
    assert lock.newest("pip", now=datetime.now(UTC)) == today


@pytest.mark.slow
def test_make_lock_moves_only_what_a_bumped_pin_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lock of requests and what it pulls in; then requests is bumped: its dependencies
    # keep their locked versions (they still fit), only requests moves.
    lock = lock_script()
    monkeypatch.setattr(lock, "ROOT", tmp_path)
    locked = tmp_path / "requirements.lock"
    locked.write_text(
        "requests==2.32.2\ncharset-normalizer==3.3.2\nidna==3.6\nurllib3==2.2.1\n"
        "certifi==2024.2.2\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = [\n    "requests==2.32.3",\n]\n'
    )
    wanted = lock.requirements_file(tmp_path, tmp_path)
    resolved = {name: v for name, (v, _) in lock.resolve(wanted, locked).items()}
    assert resolved == {
        "requests": "2.32.3", "charset-normalizer": "3.3.2", "idna": "3.6",
        "urllib3": "2.2.1", "certifi": "2024.2.2",
    }  # fmt: skip
