"""Answers are data: Jinja in an answer bakes as typed, or is refused, and never runs.

cookiecutter renders answers given as ``key=value`` or in a ``--config-file`` as Jinja
before any hook runs; the template's extension keeps them as typed. Each payload goes
through the real ``cookiecutter`` command, once as ``key=value`` and once in a config file.
"""

import json
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import TEMPLATE, run

FREE_TEXT = ("project_name", "description", "author_name")  # baked as typed
NAMES = ("project_slug", "package_name", "author_email")  # refused: not a valid name


def payloads(tmp_path: Path) -> dict[str, str]:
    marker = tmp_path / "pwned"
    return {
        "arithmetic": "{{ 7*7 }}",
        "code": f'{{{{ cycler.__init__.__globals__.os.system("touch {marker}") }}}}',
        "raw": "{% raw %}",
    }


def bake_with(tmp_path: Path, how: str, answers: dict[str, str]):
    """Bake into ``tmp_path/out`` with ``answers`` as ``key=value`` or in a config file."""
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(out)]
    if how == "config-file":
        config = tmp_path / "answers.yaml"
        config.write_text(yaml.safe_dump({"default_context": answers}), encoding="utf-8")
        command += ["--config-file", str(config), str(TEMPLATE)]
    else:
        command += [str(TEMPLATE), *(f"{key}={value}" for key, value in answers.items())]
    return run(*command, cwd=tmp_path), out


@pytest.mark.parametrize("how", ["key=value", "config-file"])
@pytest.mark.parametrize("kind", ["arithmetic", "code", "raw"])
def test_jinja_in_free_text_bakes_as_typed(tmp_path: Path, how: str, kind: str) -> None:
    payload = payloads(tmp_path)[kind]
    answers = {key: payload for key in FREE_TEXT}
    result, out = bake_with(tmp_path, how, {**answers, "project_slug": "inert-check"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "pwned").exists()
    project = out / "inert-check"
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {payload}\n\n{payload}\n")
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["authors"][0]["name"] == payload
    assert meta["description"] == " ".join(payload.split())
    assert payload in (project / "LICENSE").read_text(encoding="utf-8")


@pytest.mark.parametrize("how", ["key=value", "config-file"])
@pytest.mark.parametrize("kind", ["arithmetic", "code", "raw"])
def test_jinja_in_a_name_is_refused_and_never_runs(tmp_path: Path, how: str, kind: str) -> None:
    payload = payloads(tmp_path)[kind]
    result, out = bake_with(tmp_path, how, dict.fromkeys(NAMES, payload))
    assert result.returncode == 1
    assert not (tmp_path / "pwned").exists()
    errors = [line for line in result.stdout.splitlines() if line.startswith("ERROR: ")]
    assert [line.split()[1] for line in errors] == list(NAMES)
    for line in errors:  # the answer is quoted as typed, not its rendering
        assert f"'{payload[:40]}" in line, line
    assert result.stderr == ""  # no traceback
    assert list(out.iterdir()) == []


def test_a_replayed_answer_bakes_as_typed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    context = json.loads((TEMPLATE / "cookiecutter.json").read_text(encoding="utf-8"))
    choices = {k: v[0] for k, v in context.items() if isinstance(v, list) and k[0] != "_"}
    context.update(
        choices,
        project_name="{{ 7*7 }}",
        project_slug="replayed",
        package_name="replayed",
        __summary="{{ 7*7 }}",
    )
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"cookiecutter": context}), encoding="utf-8")
    command = [sys.executable, "-m", "cookiecutter", "-o", str(out), "--replay-file", str(replay)]
    result = run(*command, str(TEMPLATE), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    readme = (out / "replayed" / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# {{ 7*7 }}\n")


def test_derived_defaults_are_still_rendered(tmp_path: Path) -> None:
    result, out = bake_with(tmp_path, "key=value", {"project_name": "Inert Check 2"})
    assert result.returncode == 0, result.stderr
    assert (out / "inert-check-2" / "src" / "inert_check_2" / "train.py").is_file()
