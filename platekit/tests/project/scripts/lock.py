"""Write requirements.lock: every package pyproject.toml declares (its ``dependencies`` and
its ``dev`` dependency group) and all they pull in, pinned ``==``.

Run through ``make lock``. pip resolves the requirements without installing anything
(``--dry-run --ignore-installed``) and this script writes what it picked, sorted by name.
Every package the current lock pins keeps its version where the requirements still allow
it, so editing one requirement moves only what it needs; ``make lock ARGS=--upgrade``
re-resolves everything to the newest versions.
A local version label such as ``torch==2.13.0+cpu`` is written as ``torch==2.13.0`` so the
same lock serves the CPU and the CUDA builds of torch. Names are written normalised
(``pre-commit``, not ``pre_commit``). Where pyproject's ``[tool.uv]`` looks besides PyPI
(``find-links = ["vendor"]``: platekit's wheel; or an ``index-url``) heads the lock as pip's
options, so ``pip install -r requirements.lock`` alone finds what it finds (the
Dockerfile, environment.yml).

It writes requirements-cu130.lock too: torch's CUDA 13.0 build (PyPI's torch on Linux) and
every package it pulls in (the ``nvidia-*`` and ``cuda-*`` libraries, triton, ...), resolved
from the index for Linux x86_64 at the versions requirements.lock pins, each with the sha256
of every file of its release. ``make setup TORCH_VARIANT=cu130`` installs it first.

And scripts/audit.lock: pip-audit and what it pulls in, hashed the same way, for the CI step
that scans both locks for known vulnerabilities.

Then it asks the package index (its JSON simple API, online) for each direct pin's newest
release at least 7 days old and lists the pins a minor release or more behind it: the ones
to update, and the ones held back on purpose, each with the reason its ``# held back: ...``
comment gives. ``--no-outdated`` skips that.
"""

import json
import os
import platform
import re
import shlex
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = "https://pypi.org/simple"
# PyTorch's CPU index (PEP 503), for the hashes of torch's CPU builds; TORCH_CPU_INDEX names
# a mirror of it.
CPU_INDEX = os.environ.get("TORCH_CPU_INDEX") or "https://download.pytorch.org/whl/cpu"
MIN_AGE = timedelta(days=7)  # make lock proposes no release younger than this
# A lock line starting so names what could not be hashed; make setup prints it first.
UNHASHED = "# unhashed: "
SOURCE = "pyproject.toml"
GROUP = "dev"  # the dependency group locked beside the runtime dependencies
LOCK = ROOT / "requirements.lock"
CUDA_LOCK = ROOT / "requirements-cu130.lock"
AUDIT_LOCK = ROOT / "scripts" / "audit.lock"
AUDITOR = "pip-audit==2.10.0"  # scans the locks in CI (.github/workflows/ci.yml)
# The Linux x86_64 wheels pip may choose for the CUDA lock: glibc 2.28 (torch's own tag) and
# every older manylinux tag (the newest first).
CUDA_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)),
    "manylinux2014_x86_64",
    "linux_x86_64",
)
# A declared pin ``"name==version",`` in pyproject.toml, and the reason of a
# ``# held back: reason`` comment after it.
DIRECT_PIN = re.compile(
    r"""^["']([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^"'\s;]+)[^"']*["'],?"""
    r"(?:.*#\s*held back:\s*(.+))?"
)


def resolve(requirements: Path, keep: Path | None = None) -> dict[str, tuple[str, str]]:
    """``{name: (version, sha256 of the file pip picked)}`` of everything pip would install
    for ``requirements``; with ``keep`` (the current lock), each package it pins stays at
    that version where the requirements still allow it."""
    import tempfile

    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
        "--report", "-", "-r", str(requirements),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        result = None
        if keep is not None and keep.is_file():
            kept = Path(folder) / "kept.txt"
            direct = direct_pins(ROOT)  # the declared pins decide themselves
            kept.write_text(
                "".join(
                    f"{name}=={version}\n"
                    for name, version in locked_versions(keep).items()
                    if name not in direct and name != "platekit"
                )
            )
            result = subprocess.run(
                [*command, "-c", str(kept)], capture_output=True, text=True, check=False
            )
            if result.returncode != 0:
                print(f"make lock: {keep.name}'s versions no longer fit; resolving afresh")
        if result is None or result.returncode != 0:  # a changed pin needs other versions
            result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"error: pip could not resolve the declared requirements:\n{result.stderr}")
    report = json.loads(result.stdout)
    return {
        normalise(item["metadata"]["name"]): (
            without_build_label(item["metadata"]["name"], item["metadata"]["version"]),
            item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256", ""),
        )
        for item in report["install"]
    }


def resolve_cuda(torch: str, pins: dict[str, tuple[str, list[str]]]) -> dict[str, str]:
    """``{name: version}`` of torch ``torch``'s CUDA build from the index (PyPI) and all it
    pulls in on Linux x86_64, held to the versions of ``pins`` (requirements.lock's) and of
    the CUDA lock there is (its own packages move only when torch's pins need it)."""
    import tempfile

    versions = {name: version for name, (version, _) in pins.items()}
    own = locked_versions(CUDA_LOCK) if CUDA_LOCK.is_file() else {}
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder) / "constraints.txt"
        held = {**own, **versions}
        held.pop("torch", None)
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in held.items()))
        command = [
            sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
            "--report", "-", "--target", str(Path(folder) / "target"), "--only-binary", ":all:",
            *(f"--platform={tag}" for tag in CUDA_PLATFORMS), "--implementation", "cp",
            "--python-version", ".".join(platform.python_version_tuple()[:2]),
            "--index-url", INDEX, "-c", str(constraints), f"torch=={torch}",
        ]  # fmt: skip
        # The index alone: no local wheel folder or constraint of this machine's pip settings
        # (a CPU torch there would be picked); its certificate setting stays.
        env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_CERT=os.environ.get("PIP_CERT", ""))
        if not env["PIP_CERT"]:
            del env["PIP_CERT"]
        result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if result.returncode != 0 and own:  # torch's own pins moved: the CUDA stack with them
            print(f"make lock: {CUDA_LOCK.name}'s versions no longer fit; resolving afresh")
            shared = [f"{n}=={v}\n" for n, v in versions.items() if n != "torch"]
            constraints.write_text("".join(shared))
            result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        sys.exit(f"error: pip could not resolve torch=={torch}'s CUDA build:\n{result.stderr}")
    return {
        normalise(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(result.stdout)["install"]
    }


def render_cuda(versions: dict[str, str]) -> str:
    """requirements-cu130.lock's text: each pin with every file hash of its release."""
    names = sorted(versions)
    with ThreadPoolExecutor(max_workers=8) as pool:  # one index query per pin, side by side
        found = pool.map(lambda name: release_hashes(name, versions[name]), names)
        hashes = dict(zip(names, found, strict=True))
    missing = [name for name in names if not hashes[name]]
    if missing:
        sys.exit(f"error: the index gave no file hashes for {', '.join(missing)}")
    header = (
        f"# torch {versions['torch']}'s CUDA 13.0 build (PyPI's, Linux) and every package it\n"
        "# pulls in, pinned with the sha256 of each file of its release. Generated by `make lock`\n"
        "# with requirements.lock (the shared pins agree); `make setup TORCH_VARIANT=cu130`\n"
        "# installs it first (pip --require-hashes --no-deps), then requirements.lock.\n"
    )
    lines = [
        f"{name}=={versions[name]} " + " ".join(f"--hash=sha256:{h}" for h in sorted(hashes[name]))
        for name in names
    ]
    return header + "\n".join(lines) + "\n"


def locked_versions(lock: Path) -> dict[str, str]:
    """``{name: version}`` of a lock's pins."""
    found = {}
    for line in lock.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line):
            found[normalise(match.group(1))] = match.group(2)
    return found


def without_build_label(name: str, version: str) -> str:
    """torch's version without its build label (``2.13.0+cpu`` -> ``2.13.0``): one pin for
    its CPU and CUDA builds. Other labels stay (platekit's ``+src.<hash>`` names its source)."""
    return version.split("+", 1)[0] if normalise(name) == "torch" else version


def index_files(name: str) -> list[dict]:
    """The index's entries for every file of ``name`` (PEP 691 JSON simple API: file name,
    hashes, upload time); empty if it does not answer."""
    request = urllib.request.Request(
        f"{INDEX}/{normalise(name)}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return list(json.load(answer)["files"])
    except (OSError, ValueError, KeyError):
        return []


def release_hashes(name: str, version: str) -> set[str]:
    """The sha256 of every file the index holds for ``name`` ``version`` (each Python's and
    platform's wheel, the sdist), from its JSON simple API (PEP 691); empty if it does not
    answer (offline, or a package only in vendor/)."""
    files = index_files(name)
    return {
        entry["hashes"]["sha256"]
        for entry in files
        if file_version(entry["filename"]) == version and "sha256" in entry.get("hashes", {})
    }


def file_version(filename: str) -> str | None:
    """The version a wheel's or an sdist's file name holds (its local label dropped)."""
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return parts[1].split("+", 1)[0] if len(parts) >= 5 else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            return filename[: -len(suffix)].rsplit("-", 1)[-1]
    return None


def cpu_torch_hashes(version: str) -> set[str] | None:
    """The sha256 of each CPU build of torch ``version`` on PyTorch's CPU index (PEP 503
    links carry them); None if that index does not answer."""
    try:
        with urllib.request.urlopen(f"{CPU_INDEX}/torch/", timeout=30) as answer:
            page = answer.read().decode("utf-8", "replace")
    except (OSError, ValueError):  # unreachable, or not a URL
        return None
    # (No double braces here: this file is a template too, and Jinja would render them.)
    pattern = rf"torch-{re.escape(version)}(?:%2B|\+)cpu-[^\"'#]+#sha256=" + r"([0-9a-f]{64})"
    return set(re.findall(pattern, page)) or None  # an index without that build: as none


def hashed(
    resolved: dict[str, tuple[str, str]],
) -> tuple[dict[str, tuple[str, list[str]]], list[str]]:
    """Each pin with every hash it may be installed by (the index's files of its release, the
    CPU builds of torch, the file pip picked here: a local build, the vendor/ wheel), and a
    line for each build whose hash could not be learnt."""
    names = list(resolved)
    with ThreadPoolExecutor(max_workers=8) as pool:  # one index query per pin, side by side
        hashes = pool.map(lambda name: release_hashes(name, resolved[name][0]), names)
        found = dict(zip(names, hashes, strict=True))
    notes = []
    if "torch" in resolved:
        cpu = cpu_torch_hashes(resolved["torch"][0])
        if cpu is None:
            notes.append(
                f"{UNHASHED}torch {resolved['torch'][0]}'s CPU builds for Pythons other than "
                f"{'.'.join(platform.python_version_tuple()[:2])} ({CPU_INDEX} gave none to "
                "`make lock`); `make lock` on a machine that reaches it adds them"
            )
        # This is the CPU lock: PyPI's torch files are its CUDA builds, which pip would
        # otherwise prefer (and then lack their CUDA packages).
        found["torch"] = cpu or set()
    pins = {
        name: (version, sorted(found[name] | ({picked} if picked else set())))
        for name, (version, picked) in resolved.items()
    }
    return pins, notes


def normalise(name: str) -> str:
    """The package name as the index compares it: lowercase, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(root: Path) -> list[str]:
    """The requirements pyproject.toml declares: its dependencies and its dev group."""
    import tomllib

    settings = tomllib.loads((root / SOURCE).read_text())
    group = settings.get("dependency-groups", {}).get(GROUP, [])
    return [*settings["project"].get("dependencies", []), *(r for r in group if isinstance(r, str))]


def index_options(root: Path) -> list[str]:
    """pip's options for where pyproject.toml's ``[tool.uv]`` looks: ``--index-url`` and
    ``--find-links`` lines (paths as written: relative to the project)."""
    import tomllib

    uv = tomllib.loads((root / SOURCE).read_text()).get("tool", {}).get("uv", {})
    found = [f"--index-url {uv['index-url']}"] if uv.get("index-url") else []
    return found + [f"--find-links {where}" for where in uv.get("find-links", [])]


def requirements_file(root: Path, folder: Path) -> Path:
    """The declared requirements as a pip requirements file in ``folder`` (``root``'s paths
    made absolute)."""
    options = []
    for option in index_options(root):
        flag, where = option.split(" ", 1)
        local = flag == "--find-links" and "://" not in where
        options.append(f"{flag} {shlex.quote(str(root / where))}" if local else option)
    path = folder / "pyproject-requirements.txt"
    path.write_text("\n".join([*options, *declared(root)]) + "\n")
    return path


def render(pins: dict[str, tuple[str, list[str]]], notes: list[str], options: list[str]) -> str:
    python = ".".join(platform.python_version_tuple()[:2])
    header = (
        f"# Every package {SOURCE} declares and all they pull in, pinned with the sha256 of\n"
        f"# each file it may be installed from (pip checks them all: --require-hashes). Made by\n"
        f"# `make lock` (Python {python}, {platform.system()}); edit {SOURCE}, then run it again.\n"
    ) + "".join(f"{note}\n" for note in notes)
    lines = [
        f"{name}=={version} " + " ".join(f"--hash=sha256:{digest}" for digest in hashes)
        for name, (version, hashes) in sorted(pins.items())
    ]
    return header + "\n".join([*options, *lines]) + "\n"


def direct_pins(root: Path) -> dict[str, tuple[str, str | None]]:
    """``{name: (version, held-back reason or None)}`` of pyproject.toml's declared pins."""
    found: dict[str, tuple[str, str | None]] = {}
    for line in (root / SOURCE).read_text().splitlines():
        if match := DIRECT_PIN.match(line.strip()):
            found[normalise(match.group(1))] = (match.group(2), match.group(3))
    return found


def newest(name: str, now: datetime | None = None) -> str | None:
    """The newest final release of ``name`` the index has held for at least ``MIN_AGE``
    (a release younger than that is not proposed: a malicious upload is usually found and
    pulled within days); None if the index does not answer or has none."""
    files = index_files(name)
    if not files:
        return None
    cutoff = (now or datetime.now(UTC)) - MIN_AGE
    settled = set()
    for entry in files:
        version = file_version(entry["filename"])
        uploaded = entry.get("upload-time")
        if version is None or entry.get("yanked") or not uploaded:
            continue
        if re.search(r"(a|b|rc|dev|post)\d*", version) or not re.fullmatch(r"[\d.]+", version):
            continue  # pre-releases and odd spellings are never proposed
        if datetime.fromisoformat(uploaded.replace("Z", "+00:00")) <= cutoff:
            settled.add(version)
    return max(settled, key=lambda v: tuple(int(p) for p in v.split(".")), default=None)


def minor(version: str) -> tuple[int, ...]:
    """``(major, minor)`` of a release such as ``2.13.0``; missing parts are 0."""
    numbers = [int(part) for part in re.findall(r"\d+", version.split("+", 1)[0])[:2]]
    return tuple(numbers + [0] * (2 - len(numbers)))


def outdated(root: Path) -> list[str]:
    """Lines naming the direct pins a minor release or more behind the index's newest."""
    behind, held, unknown = [], [], []
    pinned = direct_pins(root)
    with ThreadPoolExecutor(max_workers=8) as pool:  # one index query per pin, side by side
        latest_of = dict(zip(pinned, pool.map(newest, pinned), strict=True))
    for name, (version, reason) in pinned.items():
        latest = latest_of[name]
        if latest is None:
            unknown.append(name)
        elif minor(latest) > minor(version):
            line = f"  {name}=={version} (newest {latest})"
            if reason:
                held.append(f"{line}: {reason}")
            else:
                behind.append(line)
    lines = []
    if behind:
        lines += ["pins behind the newest release: update them, then run make lock again", *behind]
    if held:
        lines += ["held back on purpose:", *held]
    if unknown:
        lines.append(f"not checked (not on the index, or offline): {', '.join(unknown)}")
    return lines or ["every direct pin is within a patch release of the newest"]


def write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    print(f"wrote {path.name}: {text.count('==')} pins")


def render_auditor() -> str:
    """scripts/audit.lock's text: pip-audit and what it pulls in, each pin hashed."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        wanted = Path(folder) / "audit.txt"
        wanted.write_text(f"{AUDITOR}\n")
        pins, _ = hashed(resolve(wanted))
    lines = render(pins, [], []).splitlines()[3:]  # without the lock's own header
    header = (
        "# pip-audit and what it pulls in, each pin with the sha256 of each file it may be\n"
        "# installed from, for the CI step that scans requirements.lock and\n"
        "# requirements-cu130.lock for known vulnerabilities. Generated by `make lock`.\n"
    )
    return header + "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    import tempfile

    keep = None if "--upgrade" in argv else LOCK
    with tempfile.TemporaryDirectory() as folder:
        pins, notes = hashed(resolve(requirements_file(ROOT, Path(folder)), keep))
    cuda = render_cuda(resolve_cuda(pins["torch"][0], pins)) if "torch" in pins else None
    ci = (ROOT / ".github" / "workflows" / "ci.yml").is_file()  # the scan is CI's
    auditor = render_auditor() if ci else None
    write(LOCK, render(pins, notes, index_options(ROOT)))
    if cuda is not None:
        write(CUDA_LOCK, cuda)
    if auditor is not None:
        write(AUDIT_LOCK, auditor)
    if "--no-outdated" not in argv:
        print("\n".join(outdated(ROOT)))


if __name__ == "__main__":
    main(sys.argv[1:])
