"""Bad answers: the pre-generation hook stops with one ERROR line and leaves nothing."""

from pathlib import Path

import pytest

from conftest import bake_cli


@pytest.mark.parametrize(
    ("answer", "line"),
    [
        ("project_slug=My Project", "ERROR: project_slug 'My Project' must be lowercase"),
        ("project_slug=9lives", "ERROR: project_slug '9lives' must be lowercase"),
        (
            "package_name=my-package",
            "ERROR: package_name 'my-package' is not a valid Python identifier",
        ),
        ("package_name=2fast", "ERROR: package_name '2fast' is not a valid Python identifier"),
        ("package_name=import", "ERROR: package_name 'import' is a Python keyword"),
        ("package_name=torch", "ERROR: package_name 'torch' shadows the module 'torch'"),
        ("package_name=lightning", "ERROR: package_name 'lightning' shadows"),
        ("package_name=tests", "ERROR: package_name 'tests' shadows"),
        ("package_name=json", "ERROR: package_name 'json' shadows"),
        ("author_email=nobody", "ERROR: author_email 'nobody' is not an email address"),
    ],
)
def test_bad_answer_is_rejected_cleanly(tmp_path: Path, answer: str, line: str) -> None:
    result = bake_cli(tmp_path, answer)
    assert result.returncode != 0
    errors = [row for row in result.stderr.splitlines() if row.startswith("ERROR: ")]
    # One line per bad answer (a bad slug also spoils the package name derived from it).
    assert errors, result.stderr
    assert errors[0].startswith(line)
    assert all("; answer " in error for error in errors)  # each says how to fix it
    assert list(tmp_path.iterdir()) == []
