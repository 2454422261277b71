"""Where a study lives, so that every worker (process or machine) shares it.

``sweep.storage`` is one of:

- ``sqlite`` (default): ``<study dir>/study.db``, for workers on one machine;
- ``journal``: ``<study dir>/study.journal``, an append-only file that workers on many
  machines share through a network file system (SQLite over NFS is unsafe);
- ``journal:<path>``: a journal file elsewhere;
- a database URL Optuna supports, e.g. ``postgresql://user:pass@host/db``.
"""

import json
import random
import time
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from sqlalchemy.exc import SQLAlchemyError

from platekit._errors import UserError, first_line

JOURNAL = "journal"
SQLITE = "sqlite"
# Seconds a worker waits for another's write to an SQLite file before giving up.
SQLITE_TIMEOUT_S = 60
SQLITE_MAGIC = b"SQLite format 3\x00"
CREATE_ATTEMPTS = 5  # two sweeps creating one study at the same moment: the later one retries


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
    check_journal(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


def check_journal(path: Path) -> None:
    """Refuse, without writing to it, an existing file that is not an Optuna journal."""
    if not path.exists():
        return
    if not path.is_file():
        raise UserError(f"sweep.storage: '{path}' is not a file; name a journal file")
    with path.open("rb") as handle:
        first = handle.readline(1 << 16)
    if not first:
        return  # empty: a journal about to be started
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not (isinstance(record, dict) and "op_code" in record):
        raise UserError(
            f"sweep.storage: '{path}' exists and is not an Optuna journal (its first line is "
            "not a journal record); it was left untouched: name a new file or a new study dir"
        )


def check_sqlite_file(url: str) -> None:
    """Refuse an SQLite URL naming an existing file that is not an SQLite database."""
    name = url.removeprefix("sqlite:///")
    if not url.startswith("sqlite:///") or not name or name == ":memory:":
        return
    path = Path(name)
    if path.is_file() and path.stat().st_size:
        with path.open("rb") as handle:
            if handle.read(16) != SQLITE_MAGIC:
                raise UserError(
                    f"sweep.storage: '{path}' exists and is not an SQLite database; it was "
                    "left untouched: name another file, or sweep.storage=sqlite"
                )


def _database(url: str, create: bool) -> RDBStorage:
    """Optuna's storage on the database at ``url``; the sweep (``create``) makes its
    tables, a worker does not. A connection that fails is retried a few times; a URL or
    driver that cannot work is one line at once."""
    engine_kwargs = (
        {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    )
    check_sqlite_file(url)
    last: Exception = RuntimeError("no attempt")
    for _ in range(CREATE_ATTEMPTS):
        try:
            # Workers skip table creation: two processes creating the schema at once race,
            # and two sweeps starting together retry when the other created it first.
            return RDBStorage(url, engine_kwargs=engine_kwargs, skip_table_creation=not create)
        except (ImportError, ValueError, optuna.exceptions.StorageInternalError) as error:
            raise UserError(
                f"sweep.storage: cannot open {describe(url, Path())} ({first_line(error)}); "
                "check the URL and that its database driver is installed"
            ) from None
        except SQLAlchemyError as error:
            last = error
            time.sleep(random.uniform(0.05, 0.3))
    raise UserError(
        f"sweep.storage: cannot open {describe(url, Path())} ({first_line(last)}); "
        "check that it is a database this user may write"
    )
