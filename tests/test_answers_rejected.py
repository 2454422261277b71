"""Bad answers: the bake stops with one ERROR line per bad answer, the command that re-runs
it with valid answers, no traceback, and nothing written."""

import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEMPLATE, bake_cli

sys.path.insert(0, str(TEMPLATE))
from torchplate_answers import TEXT_KEYS, refusals


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [row for row in result.stdout.splitlines() if row.startswith("ERROR: ")]


@pytest.mark.parametrize(
    ("answer", "line"),
    [
        ("project_slug=My Project", "ERROR: project_slug 'My Project' must be lowercase"),
        ("project_slug=9lives", "ERROR: project_slug '9lives' must be lowercase"),
        ("project_slug=digits\n", "ERROR: project_slug 'digits\\n' holds control characters"),
        ("project_slug=torch", "ERROR: project_slug 'torch' is the name of a package"),
        ("project_slug=" + "a" * 300, "ERROR: project_slug '" + "a" * 80 + "...' (300 char"),
        ("project_name=" + "Long " * 1000, "ERROR: project_slug 'long-long-"),
        ("project_name= ", "ERROR: project_name ' ' is blank"),
        ("project_name=A\x1b[2JB", "ERROR: project_name 'A\\u001b[2JB' holds control char"),
        (
            "package_name=my-package",
            "ERROR: package_name 'my-package' is not a valid Python identifier",
        ),
        ("package_name=2fast", "ERROR: package_name '2fast' is not a valid Python identifier"),
        ("package_name=Foo_Bar", "ERROR: package_name 'Foo_Bar' has uppercase letters"),
        ("package_name=_", "ERROR: package_name '_' must be ASCII lowercase letters"),
        ("package_name=import", "ERROR: package_name 'import' is a Python keyword"),
        ("package_name=torch", "ERROR: package_name 'torch' shadows the module 'torch'"),
        ("package_name=lightning", "ERROR: package_name 'lightning' shadows"),
        ("package_name=tests", "ERROR: package_name 'tests' shadows"),
        ("package_name=json", "ERROR: package_name 'json' shadows"),
        # Every top-level module a lock installs (import_names.txt, from their records):
        ("package_name=platekit", "ERROR: package_name 'platekit' shadows the module 'plate"),
        ("package_name=markupsafe", "ERROR: package_name 'markupsafe' shadows the module"),
        ("package_name=google", "ERROR: package_name 'google' shadows the module 'google'"),
        ("package_name=attr", "ERROR: package_name 'attr' shadows the module 'attr'"),
        ("package_name=fastapi", "ERROR: package_name 'fastapi' shadows"),  # serve=yes's
        ("package_name=uvicorn", "ERROR: package_name 'uvicorn' shadows"),
        ("package_name=nvidia", "ERROR: package_name 'nvidia' shadows"),  # the CUDA lock's
        ("package_name=triton", "ERROR: package_name 'triton' shadows"),
        ("author_email=nobody", "ERROR: author_email 'nobody' is not an email address"),
        ("author_email=you@example.com\n", "ERROR: author_email 'you@example.com\\n' holds"),
        ("author_name=Ann\x01", "ERROR: author_name 'Ann\\u0001' holds control characters"),
        ("description=one\rtwo", "ERROR: description 'one\\rtwo' holds control characters"),
        (
            "project_name=Invoice\u202egpj.exe",
            "ERROR: project_name 'Invoice\\u202egpj.exe' holds invisible format characters",
        ),
        ("author_name=Ann\u200bLee", "ERROR: author_name 'Ann\\u200bLee' holds invisible format"),
    ],
)
def test_bad_answer_is_rejected_cleanly(tmp_path: Path, answer: str, line: str) -> None:
    result = bake_cli(tmp_path, answer)
    assert result.returncode == 1
    errors = error_lines(result)
    # One line per bad answer (a bad slug also spoils the package name derived from it).
    assert errors, result.stdout + result.stderr
    assert errors[0].startswith(line)
    assert all("; answer e.g. '" in error for error in errors)  # each says how to fix it
    assert result.stderr == ""  # no traceback
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("slug", ["../evil", "/tmp/evil-absolute", "a/../../evil"])
def test_a_slug_that_is_a_path_writes_nowhere(tmp_path: Path, slug: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    result = bake_cli(out, f"project_slug={slug}")
    assert result.returncode == 1
    assert error_lines(result)[0].startswith(f"ERROR: project_slug '{slug}' must be lowercase")
    assert list(tmp_path.rglob("*")) == [out]
    assert not Path("/tmp/evil-absolute").exists()


def test_empty_slug_names_the_answer_not_the_folder(tmp_path: Path) -> None:
    result = bake_cli(tmp_path, "project_slug=")  # the output folder exists
    assert result.returncode == 1
    assert error_lines(result)[0].startswith("ERROR: project_slug '' is empty")
    assert "already exists" not in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_printed_command_bakes(tmp_path: Path) -> None:
    answers = [
        "project_name=Ünïcode Net",
        "project_slug=Ünïcode_Net",
        "author_email=you@example.com\n",
        "description=Line one\nline\x07two",
        "logger=tensorboard",
    ]
    refused = bake_cli(tmp_path, *answers)
    assert refused.returncode == 1
    lines = refused.stdout.splitlines()
    assert [line.split()[1] for line in error_lines(refused)] == [
        "project_slug", "package_name", "description", "author_email",
    ]  # fmt: skip
    command = lines[-1].strip()
    assert lines[-2] == "Nothing was written. Re-run with the suggested answers:"
    assert "\n" not in command and command.startswith(f"cookiecutter {TEMPLATE} -o {tmp_path}")
    # The command as a shell runs it (bash: $'...' quotes the multi-line description).
    python = f"{shlex.quote(sys.executable)} -m cookiecutter"
    rerun = subprocess.run(
        ["bash", "-c", python + command.removeprefix("cookiecutter")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    project = tmp_path / "unicode-net"
    assert (project / "src" / "unicode_net").is_dir()
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# Ünïcode Net\n\nLine one\nline two\n")
    assert "tensorboard" in (project / "configs" / "train.yaml").read_text()


# Values that break some rule: controls, case, separators, keywords, module and
# distribution names, lengths, Jinja, paths, non-ASCII, emoji.
AWKWARD = [
    "", " ", "_", "__", "-", "--", "9", "9lives", "Foo_Bar", "FOO", "my-package", "my project",
    "import", "match", "type", "torch", "Torch", "json", "tests", "lightning", "hydra-core",
    "pip", "../evil", "/abs/path", "a\nb", "digits\n", "\x00", "\x1b[31m", "tab\there",
    "line\u2028sep", "\udcff", "café", "Ünïcode", "🚀", "日本語", "{{ 7*7 }}", "{% raw %}",
    "you@example.com\n", "@", "a@b", "a@b.", "nobody", "x" * 65, "ab-" * 40, "a_" * 40,
    "-leading", "trailing-", "double--hyphen", "_private", "my_",
]  # fmt: skip
POOL = "aZ09-_ .@/\\\n\t\x00\x7féß🚀{}%'\""


def awkward_values() -> list[str]:
    rng = random.Random(0)
    generated = ["".join(rng.choices(POOL, k=rng.randint(0, 90))) for _ in range(400)]
    return AWKWARD + generated


@pytest.mark.parametrize("key", TEXT_KEYS)
def test_every_suggestion_passes_the_rules(key: str) -> None:
    refused = 0
    for value in awkward_values():
        for refusal in refusals({key: value}):
            refused += 1
            assert refusals({key: refusal.suggestion}) == [], (value, refusal)
            assert "\n" not in refusal.line()
    assert refused > 50


def test_suggestions_for_the_reported_cases() -> None:
    (underscore,) = refusals({"package_name": "_"})
    assert underscore.suggestion == "my_project"
    (camel,) = refusals({"package_name": "Foo_Bar"})
    assert "lowercase" in camel.rule and "identifier" not in camel.rule
    assert camel.suggestion == "foo_bar"
    (long_slug,) = refusals({"project_slug": "ab-" * 100 + "c"})
    assert len(long_slug.suggestion) <= 64 and not long_slug.suggestion.endswith("-")


def test_the_list_of_locked_modules_is_what_the_installed_locks_give() -> None:
    """import_names.txt (make lock) against the records of this venv's fresh install of every
    lock's pins: a module a new pin brings is refused as a package name from then on."""
    result = subprocess.run(
        [sys.executable, str(TEMPLATE / "tools" / "import_names.py"), "--check"],
        check=False, capture_output=True, text=True, timeout=120, cwd=TEMPLATE / "tools",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    listed = (TEMPLATE / "import_names.txt").read_text().splitlines()
    for module in ("platekit", "fastapi", "uvicorn", "markupsafe", "google", "torch", "nvidia"):
        assert module in listed
