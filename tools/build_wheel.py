"""Build the platekit wheel the baked project installs, byte for byte the same on every run.

    python tools/build_wheel.py            # write vendor/platekit-<version>-py3-none-any.whl
    python tools/build_wheel.py --check    # exit 1 if the committed wheel is not a fresh build

The bake holds no source of platekit, only this wheel (``{{cookiecutter.project_slug}}/vendor/``)
and ``vendor/platekit.txt``, which pins it by sha256 for ``pip --require-hashes``. Standard
library only, no build backend and no network: the wheel is a zip of ``platekit/src/platekit``
(``.py`` files and ``py.typed``) with its ``dist-info`` written from ``platekit/pyproject.toml``.
Entries are sorted, dated 1980-01-01 and stored uncompressed with mode 0644, so the bytes
depend on the source alone (not on the clock, the umask or the machine's zlib). ``make wheel``
runs it; a template test checks the committed wheel against a fresh build.
"""

import base64
import hashlib
import io
import sys
import tomllib
import zipfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
KIT = TEMPLATE / "platekit"
SOURCE = KIT / "src" / "platekit"
VENDOR = TEMPLATE / "{{cookiecutter.project_slug}}" / "vendor"
HASHES = VENDOR / "platekit.txt"
FIX = "run python tools/build_wheel.py and commit vendor/"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold
TAG = "py3-none-any"


def project() -> dict:
    """The ``[project]`` table of platekit's pyproject.toml."""
    return tomllib.loads((KIT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def wheel_name(meta: dict) -> str:
    return f"{meta['name']}-{meta['version']}-{TAG}.whl"


def sources() -> list[tuple[str, bytes]]:
    """``(path in the wheel, bytes)`` of each ``.py`` file and ``py.typed``, sorted."""
    found = []
    for path in SOURCE.rglob("*"):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix == ".py" or path.name == "py.typed":
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


def build() -> tuple[str, bytes]:
    """The wheel's file name and bytes."""
    meta = project()
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


def main(argv: list[str]) -> int:
    name, data = build()
    version = project()["version"]
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
    print(f"wrote vendor/{name} ({len(data)} bytes) and vendor/platekit.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
