"""Leave no trace of a refused run: remove the run directory Hydra made for it, or put back
the one of the run it resumed.

A config that breaks its rules is refused before Hydra makes anything (``CheckRun``). Other
mistakes show only inside the task (a checkpoint that does not exist, a data folder without
images, a resume that would change the run's settings), after Hydra made the run directory,
wrote ``.hydra/`` and opened the log. ``Fresh`` notes, before Hydra runs, which directories
exist, and of an existing run directory (a resumed or finished run's) the files Hydra and
the run rewrite. When the task is refused, a run directory this process made goes if it
holds nothing but Hydra's ``.hydra/``, the log, the run's lock and its ``config.yaml``; an
existing one gets those files back as they were (bytes and times), the log cut back to its
length: the finished run's record does not name the refused command.
"""

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from platekit.training._run_lock import LOCK_FILE

# Hydra's record, the run's lock (taken before a checkpoint or data path is checked) and
# the config it saves (before the trainer is built); and the job's log, <name>.log.
HYDRA_ONLY = {".hydra", LOCK_FILE, "config.yaml"}


@dataclass(frozen=True)
class Kept:
    """A file of an existing run directory as it was before this process: its bytes (a
    log: only its length) and times."""

    path: Path
    content: bytes | None
    size: int
    times: tuple[int, int]

    @classmethod
    def of(cls, path: Path) -> "Kept":
        status = path.stat()
        content = None if path.suffix == ".log" else path.read_bytes()
        return cls(path, content, status.st_size, (status.st_atime_ns, status.st_mtime_ns))

    def put_back(self) -> None:
        if self.content is None:
            os.truncate(self.path, self.size)  # the log's handler appends: at the end
        else:
            self.path.write_bytes(self.content)
        os.utime(self.path, ns=self.times)


def rewritten_files(run_dir: Path) -> list[Path]:
    """The files of ``run_dir`` a command rewrites before it may be refused."""
    if not run_dir.is_dir():
        return []
    files = [p for p in run_dir.iterdir() if p.is_file() and p.name in HYDRA_ONLY]
    files += [p for p in run_dir.glob("*.log") if p.is_file()]
    hydra = run_dir / ".hydra"
    return files + (sorted(p for p in hydra.iterdir() if p.is_file()) if hydra.is_dir() else [])


def unwritable(planned: Path | None) -> str | None:
    """Why the run directory ``planned`` cannot be made (read-only, /proc, ...), or None.

    Tried in its nearest existing folder with a scratch folder removed at once, before
    Hydra makes the directory and fails with a traceback.
    """
    if planned is None:
        return None
    existing = next((p for p in (planned, *planned.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return f"'{existing}' is not a folder"
    try:
        scratch = tempfile.mkdtemp(prefix=".write-check-", dir=existing)
    except OSError as error:
        return f"'{existing}' is not writable ({error.strerror or error})"
    os.rmdir(scratch)
    return None


@dataclass
class Fresh:
    """The directories above a planned run directory, and which of them existed."""

    existing: set[Path] = field(default_factory=set)
    parents: tuple[Path, ...] = ()
    kept: list[Kept] = field(default_factory=list)  # an existing run directory's files
    planned: Path | None = None

    def note(self, planned: Path | None) -> None:
        """Note what exists around ``planned`` (the run directory from the composed config).

        The directory Hydra makes may be named one second later (``${now:...}``), so the
        entries of its parent are noted, not just ``planned`` itself.
        """
        if planned is None:
            self.existing, self.parents, self.kept, self.planned = set(), (), [], None
            return
        planned = self.planned = planned.absolute()
        self.kept = [Kept.of(path) for path in rewritten_files(planned)]
        self.existing = {p for p in (planned, *planned.parents) if p.exists()}
        if planned.parent.is_dir():
            self.existing |= set(planned.parent.iterdir())
        self.parents = (planned.parent, *planned.parent.parents)

    def undo(self, run_dir: Path) -> None:
        """After a refusal: ``discard`` a run directory this process made, or put back the
        files of the existing one it noted (one this process added goes: its lock, a log)."""
        run_dir = run_dir.absolute()
        if self.discard(run_dir) or run_dir != self.planned or not run_dir.is_dir():
            return
        before = {kept.path for kept in self.kept}
        for path in rewritten_files(run_dir):
            if path not in before:
                path.unlink(missing_ok=True)
        for kept in self.kept:
            if kept.path.is_file():
                kept.put_back()

    def discard(self, run_dir: Path) -> bool:
        """Remove ``run_dir`` (and the empty folders made for it) if this run made it and
        wrote nothing of its own there; return whether it was removed."""
        run_dir = run_dir.absolute()
        if run_dir.parent not in self.parents or run_dir in self.existing or not run_dir.is_dir():
            return False
        if any(p.name not in HYDRA_ONLY and p.suffix != ".log" for p in run_dir.iterdir()):
            return False
        shutil.rmtree(run_dir, ignore_errors=True)
        for parent in run_dir.parents:  # folders such as outputs/eval/runs made for it
            if parent in self.existing:
                break
            try:
                parent.rmdir()  # only if empty
            except OSError:
                break
        return True
