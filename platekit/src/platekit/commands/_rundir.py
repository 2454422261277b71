"""Remove the run directory Hydra made for a run that was refused before it wrote anything.

A config that breaks the schema is refused before Hydra starts (``config/_precheck.py``). Other
mistakes show only inside the task (a checkpoint that does not exist, a data folder without
images), after Hydra made the run directory, ``.hydra/`` and the log. ``Fresh`` notes which
directories exist before Hydra runs; when the task is refused, the run directory goes only
if this process made it and it holds nothing but Hydra's ``.hydra/``, the log and the run's
lock. A directory that existed before (a resumed run's, a finished run's) is never touched.
"""

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from platekit.training._run_lock import LOCK_FILE

# Hydra's record and the run's lock (taken before a checkpoint or data path is checked);
# and the job's log, <name>.log.
HYDRA_ONLY = {".hydra", LOCK_FILE}


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

    def note(self, planned: Path | None) -> None:
        """Note what exists around ``planned`` (the run directory from the composed config).

        The directory Hydra makes may be named one second later (``${now:...}``), so the
        entries of its parent are noted, not just ``planned`` itself.
        """
        if planned is None:
            self.existing, self.parents = set(), ()
            return
        planned = planned.absolute()
        self.existing = {p for p in (planned, *planned.parents) if p.exists()}
        if planned.parent.is_dir():
            self.existing |= set(planned.parent.iterdir())
        self.parents = (planned.parent, *planned.parent.parents)

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
