"""The baked README and guide: their links lead somewhere, the README stays short in every
bake, and its serve requests get the answers it shows.

- every relative markdown link of a bake's README.md and docs/guide.md names a file of the
  bake, and each ``#anchor`` a heading of that file (GitHub's anchor of a heading);
- the README is at most 300 lines for every combination of the answers it renders;
- a ``serve=yes`` README's two ``curl`` requests (a JSON body, a CSV body), run as written
  against a real server of each model they name, answer in the shape of its samples.
"""

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import TEMPLATE, bake, run_entry, tail

DOCS = ("README.md", "docs/guide.md")
MAX_README_LINES = 300
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.MULTILINE)


def prose(text: str) -> str:
    """The text outside code blocks and inline code (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a document's headings: the heading's text lowercased, its
    punctuation dropped but for hyphens and spaces, each space a hyphen; a repeated anchor
    gets ``-1``, ``-2``, ..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")  # as shown
        slug = re.sub(r"[^\w\- ]", "", words.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(project: Path, document: str) -> list[str]:
    """``document``'s relative links (``file``, ``file#anchor``, ``#anchor``) that name no
    file of the bake or no heading of it."""
    source = project / document
    broken = []
    for target in LINK.findall(prose(source.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        linked = (source.parent / path_part).resolve() if path_part else source.resolve()
        if not linked.is_relative_to(project.resolve()) or not linked.exists():
            broken.append(f"{target}: no such file in the bake")
        elif anchor and anchor not in github_anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target}: no such heading in {linked.relative_to(project.resolve())}")
    return broken


def test_the_anchor_rule_is_githubs() -> None:
    text = "# Serve the model: `make serve`\n## A run's directory\n## Tests\n## Tests\n"
    assert github_anchors(text) == {
        "serve-the-model-make-serve",
        "a-runs-directory",
        "tests",
        "tests-1",
    }
    assert github_anchors("```\n# not a heading\n```\n") == set()


@pytest.mark.parametrize(
    "answers", [{}, {"serve": "yes", "docker": "yes"}], ids=["default", "serve-docker"]
)
def test_every_relative_link_of_the_readme_and_guide_resolves(
    tmp_path: Path, answers: dict[str, str]
) -> None:
    project = bake(tmp_path, **answers)
    assert (project / "docs" / "guide.md").read_bytes() == (
        TEMPLATE / "{{cookiecutter.project_slug}}" / "docs" / "guide.md"
    ).read_bytes()  # copied as it is: Jinja never renders it
    links = 0
    for document in DOCS:
        assert broken_links(project, document) == [], document
        links += len(LINK.findall(prose((project / document).read_text(encoding="utf-8"))))
    readme = prose((project / "README.md").read_text(encoding="utf-8"))
    assert "](docs/guide.md" in readme  # the README sends the reader to the shipped guide
    assert "platekit/docs" not in (project / "README.md").read_text(encoding="utf-8")
    assert links >= 10


def readme_answers() -> dict[str, list[str]]:
    """The choices of each question the README template renders (``cookiecutter.<name>``)."""
    questions = json.loads((TEMPLATE / "cookiecutter.json").read_text(encoding="utf-8"))
    readme = (TEMPLATE / "{{cookiecutter.project_slug}}" / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"cookiecutter\.(\w+)", readme))
    return {
        name: choices
        for name, choices in questions.items()
        if isinstance(choices, list) and not name.startswith("_") and name in named
    }


README_ANSWERS = readme_answers()
COMBINATIONS = [
    dict(zip(README_ANSWERS, choice, strict=True))
    for choice in itertools.product(*README_ANSWERS.values())
]


def test_the_readme_answers_are_the_ones_it_renders() -> None:
    assert {"python_version", "logger", "ci", "docker", "serve"} <= set(README_ANSWERS)
    assert len(COMBINATIONS) >= 3 * 4 * 2 * 2 * 2


@pytest.mark.parametrize("answers", COMBINATIONS, ids=["-".join(c.values()) for c in COMBINATIONS])
def test_the_readme_has_at_most_300_lines(tmp_path: Path, answers: dict[str, str]) -> None:
    project = bake(tmp_path, **answers)
    lines = len((project / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, (
        f"README.md has {lines} lines with {answers}: move depth into docs/guide.md"
    )


# ---- the serve requests ------------------------------------------------------------------


def curl_requests(readme: str) -> list[tuple[str, str]]:
    """``(Content-Type, shell command)`` of each ``curl ... <<'EOF'`` request the README shows,
    with its here-document body, in order."""
    requests = []
    for language, body in FENCE.findall(readme):
        if language != "bash":
            continue
        for match in re.finditer(
            r"^(curl [^\n]*<<'EOF'\n.*?^EOF\n)", body, re.DOTALL | re.MULTILINE
        ):
            kind = re.search(r"Content-Type: ([\w/]+)", match.group(1))
            assert kind, match.group(1)
            requests.append((kind.group(1), match.group(1)))
    return requests


def sample_answers(readme: str) -> list[Any]:
    """The answers the README shows: the lines of its JSON block after the requests."""
    blocks = [body for language, body in FENCE.findall(readme) if language == "json"]
    assert len(blocks) == 1, blocks
    return [json.loads(line) for line in blocks[0].splitlines() if line.strip()]


def shape(value: Any) -> Any:
    """What a JSON value holds, values aside: keys, lengths and types."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(project: Path, model: Path, root: Path) -> Iterator[int]:
    """``python -m <package>.serve`` on a free loopback port until /health answers; its port.
    Stopped with Ctrl-C (SIGINT) at the end."""
    package = next(p.name for p in (project / "src").iterdir() if (p / "__init__.py").is_file())
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"serve-{port}.log"
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", f"{package}.serve", f"model_path={model}", f"port={port}",
        f"paths.root_dir={root}",
    ]  # fmt: skip
    with log.open("w") as output:
        process = subprocess.Popen(command, cwd=project, env=env, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as up:
                    if json.loads(up.read()) == {"status": "ok"}:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield port
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def exported(project: Path, root: Path, *overrides: str) -> Path:
    """``model.onnx`` of a training run with ``overrides``, exported from its last.ckpt (as
    the README's ``make export CKPT=.../last.ckpt``)."""
    trained, run_dir = run_entry(project, "train", root / "train", "callbacks.progress_bar=null",
                                 *overrides)  # fmt: skip
    assert trained.returncode == 0, tail(trained)
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    export, export_dir = run_entry(project, "export", root / "export", f"ckpt_path={checkpoint}")
    assert export.returncode == 0, tail(export)
    return export_dir / "model.onnx"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's requests are curl's")
def test_the_readme_serve_requests_answer_as_its_samples(tmp_path: Path) -> None:
    project = bake(tmp_path, serve="yes")
    readme = (project / "README.md").read_text(encoding="utf-8")
    requests = curl_requests(readme)
    samples = sample_answers(readme)
    assert [kind for kind, _ in requests] == ["application/json", "text/csv"]
    assert len(samples) == len(requests)
    assert 'make train ARGS="data=diabetes"' in readme  # the CSV request's table model
    # The JSON request goes to the default model, the CSV rows to the diabetes table's.
    models = {
        "application/json": exported(project, tmp_path / "digits"),
        "text/csv": exported(project, tmp_path / "diabetes", "data=diabetes"),
    }
    for (kind, command), sample in zip(requests, samples, strict=True):
        with serving(project, models[kind], tmp_path / "serve") as port:
            assert "localhost:8000/" in command
            sent = subprocess.run(
                ["bash", "-c", command.replace("localhost:8000/", f"localhost:{port}/")],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        answer = json.loads(sent.stdout)
        assert shape(answer) == shape(sample), (kind, sent.stdout)
        for got, shown in zip(answer["predictions"], sample["predictions"], strict=True):
            assert got["input"] == shown["input"]
            if "class" in shown:  # the digit is the class the README says
                assert (got["class"], got["class_name"]) == (shown["class"], shown["class_name"])
                assert got["probability"] == max(got["probabilities"].values())
