"""A keyed seal: whether a checkpoint was written by this project (its key), not only intact.

The content checksum (``integrity.py``) detects corruption, not tampering: anyone can
recompute it. The seal is an HMAC-SHA256 of that checksum under the project's own key, so
only a holder of the key can make a checkpoint that counts as this project's. A sealed
checkpoint follows its own data paths from any directory and its resume keeps the run's
length, schedule, precision and threads; any other one (a teammate's, CI's, an older
version's, a file from elsewhere) still evaluates, exports and predicts, but reads no data
path outside the project and resumes with the settings the command line gives.

The key is 32 random bytes, created on first use in ``<project>/.platekit/seal.key`` (mode
0600; the folder ignores itself in git, and ``.dockerignore`` leaves it out of images), or
given as hex in ``PLATEKIT_SEAL_KEY`` (e.g. a CI secret). Share it to make a teammate's
checkpoints count as yours; delete the file to rotate it (checkpoints sealed with the old
key then count as foreign). It is never logged, stored in a checkpoint or under ``outputs/``.
"""

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from platekit._errors import UserError

log = logging.getLogger(__name__)

KEY_ENV = "PLATEKIT_SEAL_KEY"
FOLDER = ".platekit"
KEY_FILE = "seal.key"
KEY_BYTES = 32


def key_path() -> Path | None:
    """Where this project's key lives; None outside a project."""
    from platekit._project import current

    try:
        return current().root / FOLDER / KEY_FILE
    except RuntimeError:  # no project set: library use, nothing to seal with
        return None


def project_key(create: bool = False) -> bytes | None:
    """The key: ``PLATEKIT_SEAL_KEY``, else the project's file (made if ``create``)."""
    given = os.environ.get(KEY_ENV)
    if given:
        try:
            key = bytes.fromhex(given.strip())
        except ValueError:
            key = b""
        if len(key) < 16:
            raise UserError(
                f"{KEY_ENV} must be at least 32 hex digits (16 bytes); e.g. the content of "
                f"{FOLDER}/{KEY_FILE}"
            )
        return key
    path = key_path()
    if path is None:
        return None
    if not path.is_file():
        if not create:
            return None
        make_key(path)
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        raise UserError(
            f"the project's seal key {path} is unreadable; delete it to make a new one "
            "(checkpoints sealed with it then count as foreign)"
        ) from None
    return key if len(key) >= 16 else None


def make_key(path: Path) -> None:
    """Write a new key at ``path`` (0600), its folder ignoring itself in git."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# the project's checkpoint seal key: never committed\n*\n")
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(KEY_BYTES) + "\n")
    log.info("made the checkpoint seal key %s (keep it out of git and images)", path)


def seal_of(checksum: str, key: bytes) -> str:
    """``hmac-sha256:<hex>`` of a checkpoint's content checksum under ``key``."""
    return "hmac-sha256:" + hmac.new(key, checksum.encode(), hashlib.sha256).hexdigest()


def is_sealed(checksum: str | None, stored: object) -> bool:
    """Whether ``stored`` is the seal of ``checksum`` under this project's key."""
    if not isinstance(checksum, str) or not isinstance(stored, str):
        return False
    key = project_key()
    return key is not None and hmac.compare_digest(seal_of(checksum, key), stored)
