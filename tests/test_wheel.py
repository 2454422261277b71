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


def load_builder() -> ModuleType:
    """tools/build_wheel.py as a module (the template's tools are not a package)."""
    spec = importlib.util.spec_from_file_location(
        "build_wheel", TEMPLATE / "tools" / "build_wheel.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_wheel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TEMPLATE / "tools" / "build_wheel.py"), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


BUILDER = load_builder()
VERSION = BUILDER.project()["version"]  # the wheel's: a development build names its source
WHEEL = VENDOR / f"platekit-{VERSION}-py3-none-any.whl"


def test_the_committed_wheel_is_a_fresh_build_of_platekit_src() -> None:
    result = build_wheel("--check")
    assert result.returncode == 0, tail(result)
    assert sorted(p.name for p in VENDOR.glob("*.whl")) == [WHEEL.name]


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
    assert f"platekit=={VERSION} --hash=sha256:{digest}" in lines
    assert "--no-index" in lines  # installed offline, from vendor/ alone


def test_the_wheel_holds_the_package_and_its_metadata_only() -> None:
    with zipfile.ZipFile(WHEEL) as archive:
        names = archive.namelist()
        texts = {
            name: archive.read(name).decode("utf-8") for name in names if not name.endswith(".gz")
        }
        infos = archive.infolist()
    dist_info = f"platekit-{VERSION}.dist-info"
    assert {n for n in names if not n.startswith("platekit/")} == {
        f"{dist_info}/{file}" for file in ("METADATA", "WHEEL", "entry_points.txt", "RECORD")
    }
    assert names[-1] == f"{dist_info}/RECORD"
    assert "platekit/py.typed" in names
    package = [n for n in names if n.startswith("platekit/")]
    assert package == sorted(package)
    examples = "platekit/data/examples/"  # the tables platekit ships, and their sources
    assert all(n.endswith((".py", "py.typed")) for n in package if not n.startswith(examples))
    assert {n[len(examples) :] for n in package if n.startswith(examples)} == {
        "SOURCES.md", "LICENSE-scikit-learn.txt", "digits.csv.gz", "wine_data.csv",
        "diabetes_data_raw.csv.gz", "diabetes_target.csv.gz",
    }  # fmt: skip
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n or "/test_" in n]
    for name, text in texts.items():
        assert "{{" not in text and "{%" not in text, name
    # The bake's tests read each baked file as text: no template syntax in the raw bytes either.
    raw = WHEEL.read_bytes()
    assert b"{{" not in raw and b"{%" not in raw
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {info.external_attr >> 16 for info in infos} == {0o100644}
    metadata = texts[f"{dist_info}/METADATA"]
    assert f"Version: {VERSION}\n" in metadata
    assert f"Requires-Python: {KIT['requires-python']}\n" in metadata
    for requirement in KIT["dependencies"]:
        assert f"Requires-Dist: {requirement}\n" in metadata
    for requirement in KIT["optional-dependencies"]["serve"]:
        assert f'Requires-Dist: {requirement}; extra == "serve"\n' in metadata
    assert "platekit = platekit.commands._tool:main" in texts[f"{dist_info}/entry_points.txt"]


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
    assert version == VERSION
    assert Path(location).is_relative_to(target)  # the wheel's copy, not platekit/src
    assert (target / "bin" / "platekit").is_file()  # the console script


def test_pip_finds_the_wheel_from_the_template_root_and_from_the_bake(tmp_path: Path) -> None:
    """--find-links vendor is read relative to the file that says it, braces in the path and
    all: offline, pip finds platekit through the lock and through the template's list of the
    bake's pins (tools/bake_pins.py: the template's own venv)."""
    project = bake(tmp_path)
    assert (project / "vendor" / WHEEL.name).read_bytes() == WHEEL.read_bytes()
    listed = subprocess.run(
        [sys.executable, str(TEMPLATE / "tools" / "bake_pins.py")], capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    (tmp_path / "bake-pins.txt").write_text(listed)
    for number, (cwd, requirements) in enumerate(
        [(tmp_path, "bake-pins.txt"), (project, "requirements.lock")]
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


def copy_of_platekit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The builder pointed at a copy of platekit/ (source, pyproject, README, CHANGELOG)."""
    import shutil

    kit = tmp_path / "platekit"
    shutil.copytree(TEMPLATE / "platekit" / "src", kit / "src")
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md"):
        shutil.copy(TEMPLATE / "platekit" / name, kit / name)
    monkeypatch.setattr(BUILDER, "KIT", kit)
    monkeypatch.setattr(BUILDER, "SOURCE", kit / "src" / "platekit")
    monkeypatch.setattr(BUILDER, "CHANGELOG", kit / "CHANGELOG.md")
    return kit


def test_two_different_sources_never_share_a_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kit = copy_of_platekit(tmp_path, monkeypatch)
    base = KIT["version"]
    # Unreleased: each source builds as a development version holding its hash.
    changelog = kit / "CHANGELOG.md"
    changelog.write_text(BUILDER.RELEASED.sub("", changelog.read_text()))
    first_name, first = BUILDER.build()
    (kit / "src" / "platekit" / "data" / "_cells.py").write_text(
        (kit / "src" / "platekit" / "data" / "_cells.py").read_text() + "\n# one change\n"
    )
    second_name, second = BUILDER.build()
    assert first != second
    assert first_name != second_name
    assert first_name.startswith(f"platekit-{base}.dev0+src.")
    assert second_name.startswith(f"platekit-{base}.dev0+src.")
    # Released: the plain version, its hash recorded; a changed source is then refused.
    monkeypatch.setattr(BUILDER, "VENDOR", tmp_path / "vendor")
    monkeypatch.setattr(BUILDER, "HASHES", tmp_path / "vendor" / "platekit.txt")
    pins = tmp_path / "pyproject.toml"
    pins.write_text('dependencies = [\n    "torch==2.13.0",\n    "platekit==0.0.1",\n]\n')
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"platekit==0.0.1 --hash=sha256:{'0' * 64}\ntorch==2.13.0\n")
    monkeypatch.setattr(BUILDER, "PINNED_IN", [pins, lock])
    assert BUILDER.main(["build_wheel.py", "--release"]) == 0
    # every pin rewritten, the lock's with the released wheel's hash
    assert (
        pins.read_text() == f'dependencies = [\n    "torch==2.13.0",\n    "platekit=={base}",\n]\n'
    )
    [wheel] = (tmp_path / "vendor").glob("*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert lock.read_text() == f"platekit=={base} --hash=sha256:{digest}\ntorch==2.13.0\n"
    assert sorted(p.name for p in (tmp_path / "vendor").glob("*.whl")) == [
        f"platekit-{base}-py3-none-any.whl"
    ]
    assert f"wheel sha256 ({base}): " in changelog.read_text()
    capsys.readouterr()
    (kit / "src" / "platekit" / "data" / "_cells.py").write_text("# another change\n")
    assert BUILDER.main(["build_wheel.py"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: platekit {base} was released as the wheel sha256 ")
    assert line.endswith("raise the version in platekit/pyproject.toml (a development build "
                         "then carries the source's hash)")  # fmt: skip
