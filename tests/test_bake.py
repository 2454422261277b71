"""Baking: the exact file set, no leftover Jinja, answers rendered as data."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from cookiecutter.main import cookiecutter

from conftest import HOSTILE_ANSWERS, TEMPLATE, bake

# The files of a bake with the default answers.
EXPECTED_FILES = {
    ".gitignore",
    ".pre-commit-config.yaml",
    ".python-version",
    "LICENSE",
    "Makefile",
    "README.md",
    "docs/guide.md",
    "environment.yml",
    "pip.lock",
    "pyproject.toml",
    "requirements.lock",
    "requirements-cu130.lock",
    ".github/dependabot.yml",
    ".github/workflows/ci.yml",
    "scripts/audit.lock",
    "scripts/check_lock.py",
    "scripts/gpu_check.py",
    "scripts/lock.py",
    "scripts/slurm.sbatch",
    "scripts/sweep.sbatch",
    "scripts/setup.sh",
    "scripts/torch_pin.py",
    "scripts/torch_variant.py",
    "scripts/torchrun.sh",
    *(
        f"vendor/{wheel.name}"
        for wheel in (TEMPLATE / "{{cookiecutter.project_slug}}" / "vendor").glob("*.whl")
    ),
    "vendor/platekit.txt",
    "configs/bench.yaml",
    "configs/callbacks/default.yaml",
    "configs/callbacks/none.yaml",
    "configs/data/csv.yaml",
    "configs/data/diabetes.yaml",
    "configs/data/digits.yaml",
    "configs/data/image_folder.yaml",
    "configs/data/sequences.yaml",
    "configs/debug/fast_dev_run.yaml",
    "configs/debug/limit.yaml",
    "configs/debug/overfit.yaml",
    "configs/eval.yaml",
    "configs/experiment/mlp_long.yaml",
    "configs/export.yaml",
    "configs/hparams_search/optuna.yaml",
    "configs/hydra/default.yaml",
    "configs/logger/csv.yaml",
    "configs/logger/tensorboard.yaml",
    "configs/model/cnn.yaml",
    "configs/model/gru.yaml",
    "configs/model/mlp.yaml",
    "configs/model/regressor.yaml",
    "configs/optimizer/adam.yaml",
    "configs/optimizer/adamw.yaml",
    "configs/optimizer/sgd.yaml",
    "configs/paths/default.yaml",
    "configs/predict.yaml",
    "configs/scheduler/cosine.yaml",
    "configs/scheduler/none.yaml",
    "configs/scheduler/onecycle.yaml",
    "configs/scheduler/step.yaml",
    "configs/scheduler/warmup_cosine.yaml",
    "configs/train.yaml",
    "configs/trainer/cpu.yaml",
    "configs/trainer/ddp.yaml",
    "configs/trainer/ddp_cpu.yaml",
    "configs/trainer/default.yaml",
    "configs/trainer/gpu.yaml",
    "src/digits_classifier/__init__.py",
    "src/digits_classifier/bench.py",
    "src/digits_classifier/data/__init__.py",
    "src/digits_classifier/data/digits.py",
    "src/digits_classifier/doctor.py",
    "src/digits_classifier/eval.py",
    "src/digits_classifier/export.py",
    "src/digits_classifier/models/__init__.py",
    "src/digits_classifier/models/nets.py",
    "src/digits_classifier/predict.py",
    "src/digits_classifier/sweep.py",
    "src/digits_classifier/train.py",
    "tests/conftest.py",
    "tests/test_configs.py",
    "tests/test_data_contract.py",
    "tests/test_export.py",
    "tests/test_gpu.py",
    "tests/test_predict.py",
    "tests/test_resume.py",
    "tests/test_train.py",
}

# Files that exist only for one answer (post_gen drops them otherwise). Extend with new options.
OPTIONAL_FILES = {
    ("logger", "wandb"): {"configs/logger/wandb.yaml"},
    ("logger", "mlflow"): {"configs/logger/mlflow.yaml"},
    ("ci", "github"): {".github/workflows/ci.yml", ".github/dependabot.yml", "scripts/audit.lock"},
    ("docker", "yes"): {"Dockerfile", ".dockerignore"},
    # The server's tests are platekit's (platekit/tests/commands/test_serve.py), run once.
    ("serve", "yes"): {"configs/serve.yaml", "src/digits_classifier/serve.py"},
}
DEFAULT_ANSWERS = {"logger": "csv", "ci": "github", "docker": "no", "serve": "no"}


def expected_files(**answers: str) -> set[str]:
    """The file set of a bake with these answers (the rest default)."""
    chosen = {**DEFAULT_ANSWERS, **answers}
    files = set(EXPECTED_FILES)
    for (question, value), paths in OPTIONAL_FILES.items():
        files = files | paths if chosen[question] == value else files - paths
    return files


def files_of(project: Path) -> set[str]:
    return {
        p.relative_to(project).as_posix()
        for p in project.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".git" not in p.parts
    }


def test_default_bake_has_exactly_the_expected_files(default_project: Path) -> None:
    assert default_project.name == "digits-classifier"
    assert files_of(default_project) == EXPECTED_FILES


def test_no_template_syntax_left(default_project: Path) -> None:
    for path in default_project.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            # The vendored wheel is binary (stored, so its sources are plain bytes in it).
            text = path.read_bytes().decode("utf-8", errors="replace")
            assert "{{" not in text and "{%" not in text and "cookiecutter" not in text, path


def test_every_python_yaml_and_toml_file_parses(default_project: Path) -> None:
    for path in default_project.rglob("*.py"):
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for path in default_project.rglob("*.yaml"):
        yaml.safe_load(path.read_text(encoding="utf-8"))
    meta = tomllib.loads((default_project / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "digits-classifier"
    for entry in ("train", "eval", "export", "predict"):
        script = meta["scripts"][f"digits-classifier-{entry}"]
        assert script == f"digits_classifier.{entry}:main"
    assert (default_project / ".python-version").read_text().strip() == "3.11"


def test_baked_code_is_lint_clean(default_project: Path) -> None:
    for args in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args],
            cwd=default_project,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_hostile_answers_land_as_data(tmp_path: Path) -> None:
    project = bake(tmp_path, **HOSTILE_ANSWERS)
    assert project.name == "cafe-unicode-net"
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["authors"] == [
        {"name": HOSTILE_ANSWERS["author_name"], "email": HOSTILE_ANSWERS["author_email"]}
    ]
    assert meta["description"] == " ".join(HOSTILE_ANSWERS["description"].split())
    assert HOSTILE_ANSWERS["author_name"] in (project / "LICENSE").read_text(encoding="utf-8")
    assert HOSTILE_ANSWERS["description"] in (project / "README.md").read_text(encoding="utf-8")
    assert (project / "src" / "cafe_unicode_net" / "train.py").is_file()


@pytest.mark.parametrize(
    ("license_name", "first_line"),
    [
        ("MIT", "MIT License"),
        ("Apache-2.0", "Copyright"),
        ("BSD-3-Clause", "BSD 3-Clause License"),
        ("Proprietary", "Copyright (c)"),
    ],
)
def test_license_choice(tmp_path: Path, license_name: str, first_line: str) -> None:
    project = bake(tmp_path, license=license_name)
    assert (project / "LICENSE").read_text().startswith(first_line)
    assert not (project / "licenses").exists()
    declared = tomllib.loads((project / "pyproject.toml").read_text())["project"]["license"]
    expected = "LicenseRef-Proprietary" if license_name == "Proprietary" else license_name
    assert declared == expected
    if license_name == "Apache-2.0":  # the whole license, not only the notice of its appendix
        text = (project / "LICENSE").read_text()
        assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
        assert "9. Accepting Warranty or Additional Liability." in text
        assert text.count("\n") > 200


def test_baking_again_over_the_same_folder_is_safe(tmp_path: Path) -> None:
    first = bake(tmp_path)
    before = {p: (first / p).read_bytes() for p in files_of(first)}
    cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(tmp_path), overwrite_if_exists=True)
    assert {p: (first / p).read_bytes() for p in files_of(first)} == before


def test_scripts_without_template_answers_bake_byte_for_byte(default_project: Path) -> None:
    """A script that names no answer comes out as written: Jinja would otherwise eat its
    double braces (a regex's ``{{64}}`` in an f-string baked as ``64``, and `make lock`
    then found no CPU torch hash on any index)."""
    source = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
    checked = 0
    for path in sorted(source.iterdir()):
        text = path.read_text()
        if "cookiecutter" in text:
            continue
        assert (default_project / "scripts" / path.name).read_text() == text, path.name
        checked += 1
    assert checked >= 5
