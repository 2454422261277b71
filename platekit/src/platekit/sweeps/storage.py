"""Where a study lives, so that every worker (process or machine) shares it.

``sweep.storage`` is one of:

- ``sqlite`` (default): ``<study dir>/study.db``, for workers on one machine;
- ``journal``: ``<study dir>/study.journal``, an append-only file that workers on many
  machines share through a network file system (SQLite over NFS is unsafe);
- ``journal:<path>``: a journal file elsewhere;
- a database URL Optuna supports, e.g. ``postgresql://user:pass@host/db``.
"""

from pathlib import Path

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

from ..cli.errors import UserError

JOURNAL = "journal"
SQLITE = "sqlite"
# Seconds a worker waits for another's write to an SQLite file before giving up.
SQLITE_TIMEOUT_S = 60


def open_storage(setting: str, study_dir: Path, create: bool) -> BaseStorage:
    """The storage ``setting`` names; ``create`` makes its tables (once, before workers)."""
    if setting == SQLITE:
        return _database(f"sqlite:///{(study_dir / 'study.db').resolve()}", create)
    if setting == JOURNAL:
        return _journal(study_dir / "study.journal")
    if setting.startswith(f"{JOURNAL}:"):
        return _journal(Path(setting.removeprefix(f"{JOURNAL}:")).expanduser())
    if "://" in setting:
        return _database(setting, create)
    raise UserError(
        f"sweep.storage={setting} is not a storage; use sqlite (one machine), journal or "
        "journal:<path> (a file many machines share), or a database URL such as "
        "postgresql://host/db"
    )


def describe(setting: str, study_dir: Path) -> str:
    """Where the study is, for the console (a URL's password left out)."""
    if setting == SQLITE:
        return str(study_dir / "study.db")
    if setting == JOURNAL:
        return str(study_dir / "study.journal")
    if "://" in setting:
        scheme, _, rest = setting.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}"
    return setting.removeprefix(f"{JOURNAL}:")


def _journal(path: Path) -> JournalStorage:
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


def _database(url: str, create: bool) -> RDBStorage:
    engine_kwargs = (
        {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    )
    try:
        # Workers skip table creation: two processes creating the schema at once race.
        return RDBStorage(url, engine_kwargs=engine_kwargs, skip_table_creation=not create)
    except (ImportError, ValueError, optuna.exceptions.StorageInternalError) as error:
        raise UserError(
            f"sweep.storage: cannot open {describe(url, Path())} ({error}); check the URL "
            "and that its database driver is installed"
        ) from None
