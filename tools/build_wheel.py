"""Build the platekit wheel the baked project installs, byte for byte the same on every run.

    python tools/build_wheel.py            # write vendor/platekit-<version>-py3-none-any.whl
    python tools/build_wheel.py --check    # exit 1 if the committed wheel is not a fresh build

The bake holds no source of platekit, only this wheel (``{{cookiecutter.project_slug}}/vendor/``)
and ``vendor/platekit.txt``, which pins it by sha256 for ``pip --require-hashes``. Standard
library only, no build backend and no network: the wheel is a zip of ``platekit/src/platekit``
(``.py`` files and its package data: ``py.typed``, the example tables) with its ``dist-info``
written from ``platekit/pyproject.toml``.
Entries are sorted, dated 1980-01-01 and stored uncompressed with mode 0644, so the bytes
depend on the source alone (not on the clock, the umask or the machine's zlib). ``make wheel``
runs it; a template test checks the committed wheel against a fresh build.

One version string names one wheel. A version platekit/CHANGELOG.md records as released
(``wheel sha256 (0.3.1): <hex>`` under its heading) builds as itself and must build those
bytes: a changed source is refused until the version is raised. Any other version builds as a
development version holding the source's hash, ``0.3.2.dev0+src.<12 hex>``, so two different
sources never share one. ``--release`` builds the plain version and records its hash in the
CHANGELOG. Each build rewrites the ``platekit==`` pins of the bake (pyproject.toml, the lock).

    python tools/build_wheel.py --release  # platekit <version>, its hash into CHANGELOG.md
"""

import base64
import hashlib
import io
import re
import sys
import tomllib
import zipfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
KIT = TEMPLATE / "platekit"
SOURCE = KIT / "src" / "platekit"
VENDOR = TEMPLATE / "{{cookiecutter.project_slug}}" / "vendor"
HASHES = VENDOR / "platekit.txt"
CHANGELOG = KIT / "CHANGELOG.md"
PINNED_IN = [VENDOR.parent / "pyproject.toml", VENDOR.parent / "requirements.lock"]
# A pin in the lock (``platekit==X --hash=...``) or in pyproject's dependencies
# (``"platekit==X",``).
PIN = re.compile(r'^(\s*"?)platekit==[^\s"]+( --hash=sha256:[0-9a-f]{64})?', re.MULTILINE)
RELEASED = re.compile(r"^wheel sha256 \((\S+)\): ([0-9a-f]{64})$", re.MULTILINE)
FIX = "run python tools/build_wheel.py and commit vendor/"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold
TAG = "py3-none-any"


def project(release: bool = False) -> dict:
    """The ``[project]`` table of platekit's pyproject.toml, its version the wheel's: the
    plain version if released (or ``release``), else a development version of the source."""
    meta = tomllib.loads((KIT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if not release and meta["version"] not in released():
        meta["version"] = f"{meta['version']}.dev0+src.{source_hash()[:12]}"
    return meta


def released() -> dict[str, str]:
    """``{version: wheel sha256}`` of the releases the CHANGELOG records."""
    text = CHANGELOG.read_text(encoding="utf-8") if CHANGELOG.is_file() else ""
    return dict(RELEASED.findall(text))


def source_hash() -> str:
    """sha256 over the package's files, pyproject.toml and the README (the METADATA's body):
    what a wheel is built from."""
    digest = hashlib.sha256((KIT / "pyproject.toml").read_bytes())
    readme = KIT / "README.md"
    digest.update(readme.read_bytes() if readme.is_file() else b"")
    for name, data in sources():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def wheel_name(meta: dict) -> str:
    return f"{meta['name']}-{meta['version']}-{TAG}.whl"


def sources() -> list[tuple[str, bytes]]:
    """``(path in the wheel, bytes)`` of each ``.py`` file and each file pyproject.toml's
    ``[tool.setuptools.package-data]`` names (``py.typed``, the example tables), sorted."""
    setuptools = tomllib.loads((KIT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    data = {p for pattern in setuptools["setuptools"]["package-data"]["platekit"]
            for p in SOURCE.glob(pattern)}  # fmt: skip
    found = []
    for path in SOURCE.rglob("*"):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix == ".py" or path in data:
            found.append((path.relative_to(SOURCE.parent).as_posix(), path.read_bytes()))
    return sorted(found)


def metadata(meta: dict) -> bytes:
    """Core metadata 2.1: name, version, summary, Python, license, dependencies and extras."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
        f"Summary: {meta['description']}",
    ]
    if isinstance(meta.get("license"), str):  # an SPDX expression; 2.1 has no License-Expression
        lines.append(f"License: {meta['license']}")
    lines.append(f"Requires-Python: {meta['requires-python']}")
    lines += [f"Requires-Dist: {dep}" for dep in meta.get("dependencies", [])]
    for extra, deps in sorted(meta.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {dep}; extra == "{extra}"' for dep in deps]
    readme = KIT / meta["readme"] if isinstance(meta.get("readme"), str) else None
    body = ""
    if readme is not None and readme.is_file():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + readme.read_text(encoding="utf-8")
    return ("\n".join(lines) + "\n" + body).encode("utf-8")


def entry_points(meta: dict) -> bytes:
    scripts = meta.get("scripts", {})
    lines = ["[console_scripts]", *(f"{name} = {scripts[name]}" for name in sorted(scripts))]
    return ("\n".join(lines) + "\n").encode("utf-8")


def wheel_file() -> bytes:
    return (
        "Wheel-Version: 1.0\nGenerator: torchplate tools/build_wheel.py\n"
        f"Root-Is-Purelib: true\nTag: {TAG}\n"
    ).encode()


def digest(data: bytes) -> str:
    """``sha256=<urlsafe base64, unpadded>``, as RECORD writes it."""
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.create_system = 3  # Unix, so the mode below is read
    info.external_attr = (0o100644 & 0xFFFF) << 16  # a regular file, rw-r--r--
    info.compress_type = zipfile.ZIP_STORED
    return info


def build(release: bool = False) -> tuple[str, bytes]:
    """The wheel's file name and bytes."""
    meta = project(release)
    dist_info = f"{meta['name']}-{meta['version']}.dist-info"
    files = sources()
    files += [
        (f"{dist_info}/METADATA", metadata(meta)),
        (f"{dist_info}/WHEEL", wheel_file()),
        (f"{dist_info}/entry_points.txt", entry_points(meta)),
    ]
    record = "".join(f"{name},{digest(data)},{len(data)}\n" for name, data in files)
    files.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files:
            archive.writestr(entry(name), data)
    return wheel_name(meta), buffer.getvalue()


def hashes_file(name: str, data: bytes, version: str) -> str:
    """vendor/platekit.txt: the wheel pinned by sha256, offline (pip --require-hashes)."""
    return (
        "# The platekit wheel beside this file, pinned by its sha256. make setup, the Dockerfile\n"
        "# and CI install it first, before requirements.lock, with\n"
        "#   python -m pip install --no-deps --require-hashes -r vendor/platekit.txt\n"
        "# so no same-named upload to a package index can stand in for it. Written by the\n"
        "# template's tools/build_wheel.py; make check-lock checks it against the wheel.\n"
        f"# {name}\n"
        "--no-index\n"
        "--find-links .\n"
        f"platekit=={version} --hash=sha256:{hashlib.sha256(data).hexdigest()}\n"
    )


def problems(name: str, data: bytes, version: str) -> list[str]:
    """What differs between vendor/ and a fresh build; empty if it is current."""
    found = []
    wheels = sorted(p.name for p in VENDOR.glob("*.whl"))
    if wheels != [name]:
        found.append(f"vendor/ holds {wheels or 'no wheel'}, not [{name!r}]")
    elif (VENDOR / name).read_bytes() != data:
        found.append(f"vendor/{name} differs from a fresh build of platekit/src")
    if not HASHES.is_file() or HASHES.read_text() != hashes_file(name, data, version):
        found.append("vendor/platekit.txt does not pin the fresh build's sha256")
    return found


def refused_release(version: str, data: bytes) -> str | None:
    """Why a released version may not name these bytes, or None."""
    recorded = released().get(version)
    built = hashlib.sha256(data).hexdigest()
    if recorded is None or recorded == built:
        return None
    return (
        f"platekit {version} was released as the wheel sha256 {recorded[:12]}... "
        f"(CHANGELOG.md); this source builds another ({built[:12]}...): raise the version in "
        "platekit/pyproject.toml (a development build then carries the source's hash)"
    )


def record_release(version: str, data: bytes) -> None:
    """Write ``wheel sha256 (<version>): <hex>`` under the version's CHANGELOG heading."""
    text = CHANGELOG.read_text(encoding="utf-8")
    heading = re.search(rf"^## {re.escape(version)} .*$", text, re.MULTILINE)
    if heading is None:
        raise SystemExit(f"error: CHANGELOG.md has no '## {version} (date)' heading; add one")
    line = f"wheel sha256 ({version}): {hashlib.sha256(data).hexdigest()}"
    if line not in text:
        end = heading.end()
        text = text[:end] + "\n\n" + line + text[end:]
        CHANGELOG.write_text(text, encoding="utf-8")


def rewrite_pins(version: str, data: bytes) -> None:
    """Every ``platekit==`` pin of the bake (its pyproject.toml's and its lock's) names this
    build (and, where the pin carries a hash, as the lock's does, this build's hash)."""
    digest = hashlib.sha256(data).hexdigest()

    def pin(match: re.Match[str]) -> str:
        hashed = f" --hash=sha256:{digest}" if match.group(2) else ""
        return f"{match.group(1)}platekit=={version}{hashed}"

    for path in PINNED_IN:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            new = PIN.sub(pin, text)
            if new != text:
                path.write_text(new, encoding="utf-8")


def main(argv: list[str]) -> int:
    release = "--release" in argv[1:]
    name, data = build(release)
    version = project(release)["version"]
    refused = refused_release(version, data)
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return 1
    if "--check" in argv[1:]:
        found = problems(name, data, version)
        if found:
            print(f"error: {'; '.join(found)}; {FIX}", file=sys.stderr)
            return 1
        print(f"vendor/{name} matches platekit/src")
        return 0
    VENDOR.mkdir(exist_ok=True)
    for old in VENDOR.glob("*.whl"):
        if old.name != name:
            old.unlink()
    for path, content in ((VENDOR / name, data), (HASHES, hashes_file(name, data, version))):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(content if isinstance(content, bytes) else content.encode())
        tmp.replace(path)
    rewrite_pins(version, data)
    if release:
        record_release(version, data)
    print(f"wrote vendor/{name} ({len(data)} bytes) and vendor/platekit.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
