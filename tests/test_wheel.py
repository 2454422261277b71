"""The bake installs platekit from one committed wheel: it is a fresh build of platekit/src,
pinned by its sha256, installable by pip, and carries nothing but the package."""

import hashlib
import importlib.util
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from conftest import TEMPLATE, bake, tail

BAKED = TEMPLATE / "{{cookiecutter.project_slug}}"
VENDOR = BAKED / "vendor"
KIT = tomllib.loads((TEMPLATE / "platekit" / "pyproject.toml").read_text())["project"]
WHEEL = VENDOR / f"platekit-{KIT['version']}-py3-none-any.whl"


def build_wheel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TEMPLATE / "tools" / "build_wheel.py"), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_committed_wheel_is_a_fresh_build_of_platekit_src() -> None:
    result = build_wheel("--check")
    assert result.returncode == 0, tail(result)
    assert sorted(p.name for p in VENDOR.glob("*.whl")) == [WHEEL.name]


def load_builder() -> ModuleType:
    """tools/build_wheel.py as a module (the template's tools are not a package)."""
    spec = importlib.util.spec_from_file_location(
        "build_wheel", TEMPLATE / "tools" / "build_wheel.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_is_byte_identical_and_check_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    builder = load_builder()
    name, first = builder.build()
    assert (name, first) == builder.build()
    assert first == WHEEL.read_bytes()
    # A vendor/ whose wheel is not the fresh build fails --check with one line, the fix in it.
    stale = tmp_path / "vendor"
    stale.mkdir()
    edited = first.replace(b"__version__", b"__VERSION__", 1)
    assert edited != first
    (stale / name).write_bytes(edited)
    (stale / "platekit.txt").write_text((VENDOR / "platekit.txt").read_text())
    monkeypatch.setattr(builder, "VENDOR", stale)
    monkeypatch.setattr(builder, "HASHES", stale / "platekit.txt")
    assert builder.main(["build_wheel.py", "--check"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"error: vendor/{name} differs from a fresh build of platekit/src; "
        "run python tools/build_wheel.py and commit vendor/"
    )
    assert builder.main(["build_wheel.py"]) == 0  # the fix, here into tmp_path
    assert (stale / name).read_bytes() == first
    assert builder.main(["build_wheel.py", "--check"]) == 0


def test_the_wheel_is_pinned_by_its_sha256() -> None:
    digest = hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    lines = (VENDOR / "platekit.txt").read_text().splitlines()
    assert f"platekit=={KIT['version']} --hash=sha256:{digest}" in lines
    assert "--no-index" in lines  # installed offline, from vendor/ alone


def test_the_wheel_holds_the_package_and_its_metadata_only() -> None:
    with zipfile.ZipFile(WHEEL) as archive:
        names = archive.namelist()
        texts = {name: archive.read(name).decode("utf-8") for name in names}
        infos = archive.infolist()
    dist_info = f"platekit-{KIT['version']}.dist-info"
    assert {n for n in names if not n.startswith("platekit/")} == {
        f"{dist_info}/{file}" for file in ("METADATA", "WHEEL", "entry_points.txt", "RECORD")
    }
    assert names[-1] == f"{dist_info}/RECORD"
    assert "platekit/py.typed" in names
    package = [n for n in names if n.startswith("platekit/")]
    assert package == sorted(package)
    assert all(n.endswith((".py", "py.typed")) for n in package)
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n or "/test_" in n]
    for name, text in texts.items():
        assert "{{" not in text and "{%" not in text, name
    # The bake's tests read each baked file as text: no template syntax in the raw bytes either.
    raw = WHEEL.read_bytes()
    assert b"{{" not in raw and b"{%" not in raw
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {info.external_attr >> 16 for info in infos} == {0o100644}
    metadata = texts[f"{dist_info}/METADATA"]
    assert f"Version: {KIT['version']}\n" in metadata
    assert f"Requires-Python: {KIT['requires-python']}\n" in metadata
    for requirement in KIT["dependencies"]:
        assert f"Requires-Dist: {requirement}\n" in metadata
    for requirement in KIT["optional-dependencies"]["serve"]:
        assert f'Requires-Dist: {requirement}; extra == "serve"\n' in metadata
    assert "platekit = platekit.cli.tool:main" in texts[f"{dist_info}/entry_points.txt"]


def test_pip_installs_the_wheel_and_it_imports(tmp_path: Path) -> None:
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-compile", "--target", str(target), str(WHEEL)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert install.returncode == 0, tail(install)
    script = "import platekit, sys; print(platekit.__version__); print(platekit.__file__)"
    found = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {script}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert found.returncode == 0, tail(found)
    version, location = found.stdout.split()
    assert version == KIT["version"]
    assert Path(location).is_relative_to(target)  # the wheel's copy, not platekit/src
    assert (target / "bin" / "platekit").is_file()  # the console script


def test_pip_finds_the_wheel_from_the_template_root_and_from_the_bake(tmp_path: Path) -> None:
    """--find-links vendor is read relative to the file that says it, braces in the path and
    all: offline, pip finds platekit through requirements.txt and through the lock."""
    project = bake(tmp_path)
    assert (project / "vendor" / WHEEL.name).read_bytes() == WHEEL.read_bytes()
    for number, (cwd, requirements) in enumerate(
        [
            (TEMPLATE, "{{cookiecutter.project_slug}}/requirements.txt"),
            (project, "requirements.txt"),
            (project, "requirements.lock"),
        ]
    ):
        dest = tmp_path / f"found-{number}"
        # As a constraints file, so only platekit is looked for; its options apply as in -r.
        found = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-index", "--no-deps",
             "--dest", str(dest), "--constraint", requirements, "platekit"],
            cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert found.returncode == 0, (requirements, tail(found))
        assert [p.name for p in dest.iterdir()] == [WHEEL.name], requirements


def test_the_hash_file_installs_offline_and_rejects_another_wheel(tmp_path: Path) -> None:
    """What make setup, CI and the Dockerfile install first: a same-named wheel fails."""
    project = bake(tmp_path)

    def install(target: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
             "--require-hashes", "--target", str(tmp_path / target), "-r", "vendor/platekit.txt"],
            cwd=project, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    assert install("good").returncode == 0
    wheel = project / "vendor" / WHEEL.name
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # a different file under the same name
    result = install("bad")
    assert result.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr, tail(result)


def test_the_bakes_large_file_hook_leaves_the_wheel_alone() -> None:
    """The wheel is stored uncompressed (its bytes then do not depend on the machine's zlib)
    and grows with platekit/src: the bake's 500 kB pre-commit guard skips vendor/."""
    config = (BAKED / ".pre-commit-config.yaml").read_text()
    hook = config[config.index("id: check-added-large-files") :].split("- id:")[0]
    assert "exclude: ^vendor/" in hook
