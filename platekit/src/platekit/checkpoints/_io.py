"""Checkpoints: safe, verified loading (tensors and plain containers only), atomic writes.

``load_checkpoint`` is the one place that turns a missing, unreadable, broken, unsafe,
corrupt or foreign checkpoint into a UserError; every entry point loads through it, and
Lightning writes through ``SafeCheckpointIO`` (``save_checkpoint``).
"""

import errno
import os
import pickle
import re
import stat
import zipfile
from _compat_pickle import IMPORT_MAPPING
from pathlib import Path
from typing import Any, BinaryIO

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch import nn

from platekit._errors import UserError, first_line
from platekit._files import write_atomic
from platekit.checkpoints._integrity import check_finite, seal, verify
from platekit.checkpoints._upgrade import upgrade

LISTED_KEYS = 10  # how many key names an error message lists
# torch 2.13: "Trying to load unsupported GLOBAL posix.system whose module posix is blocked"
# or "Unsupported global: GLOBAL builtins.eval was not an allowed global by default".
BLOCKED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a Lightning checkpoint with ``weights_only=True``, verified.

    One ``torch.load``; then the content checksum is checked (a checkpoint without one loads
    with a warning) and every floating weight must be finite.

    Raises:
        UserError: the path is missing, a directory, a symlink loop or unreadable; the file
            is not a checkpoint, is truncated or corrupt, carries pickled code, or holds
            NaN/Inf weights.
    """
    path = Path(path)
    check_readable_file(path)
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a cut one is not
        raise UserError(
            f"checkpoint '{path}' is not a readable PyTorch checkpoint (truncated or corrupt: "
            "not a complete torch.save archive); use another checkpoint or retrain"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(_unpickling_message(path, error)) from error
    except PermissionError as error:
        raise UserError(_permission_message(path)) from error
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as error:
        raise UserError(
            f"checkpoint '{path}' is not a readable PyTorch checkpoint (truncated or "
            f"corrupt: {first_line(error)}); use another checkpoint or retrain"
        ) from error
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise UserError(
            f"checkpoint '{path}' has no 'state_dict'; pass a checkpoint written by training"
        )
    check_nesting(checkpoint, path)
    verify(checkpoint, path)
    check_finite(checkpoint["state_dict"], path)
    upgrade(checkpoint)  # platekit 0.1's metric names
    return checkpoint


MAX_DEPTH = 64  # containers inside containers; a Lightning checkpoint nests about 10 deep


def check_nesting(checkpoint: dict[str, Any], path: Path) -> None:
    """Refuse a checkpoint whose dicts and lists nest deeper than ``MAX_DEPTH`` or contain
    themselves: everything after this walks them, and would end in a RecursionError.

    Walked with a stack of its own (no recursion); a container met again on its own path is
    a cycle, one shared by two paths is not.
    """
    stack: list[tuple[Any, str, int, bool]] = [(checkpoint, "", 0, False)]
    open_path: set[int] = set()  # ids of the containers on the current path
    while stack:
        node, where, depth, leaving = stack.pop()
        if leaving:
            open_path.discard(id(node))
            continue
        if not isinstance(node, dict | list | tuple):
            continue
        place = where or "its top"
        if id(node) in open_path:
            raise UserError(
                f"checkpoint '{path}' holds a container inside itself at {cut(place)}, which "
                "no checkpoint of this project does; use another checkpoint or retrain"
            )
        if depth >= MAX_DEPTH:
            raise UserError(
                f"checkpoint '{path}' nests its data more than {MAX_DEPTH} levels deep "
                f"(at {cut(place)}), which no checkpoint of this project does; use another "
                "checkpoint or retrain"
            )
        open_path.add(id(node))
        stack.append((node, where, depth, True))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, dict | list | tuple):
                step = f"{where}.{key}" if isinstance(node, dict) else f"{where}[{key}]"
                stack.append((value, step.lstrip("."), depth + 1, False))


def cut(where: str, limit: int = 80) -> str:
    """A key path for a message: its start and end when long."""
    return where if len(where) <= limit else f"{where[:40]}...{where[-30:]}"


def save_checkpoint(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Write ``checkpoint`` atomically with its content checksum (see ``integrity.py``).

    Also the way to re-save a checkpoint edited by hand, so that it verifies on load.
    """
    sealed, nbytes = seal(checkpoint)

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            sink = _ErrorKeepingFile(handle)
            try:
                # torch.save needs only write and flush; its stub asks for a whole IO[bytes].
                torch.save(sealed, sink)  # type: ignore[arg-type]
            except RuntimeError:
                if sink.error is not None:  # e.g. ENOSPC: write_atomic names the file
                    raise sink.error from None
                raise

    write_atomic(Path(path), write, size=nbytes)


class _ErrorKeepingFile:
    """A file for torch.save that keeps the OSError of a failed write.

    torch's C++ writer swallows an exception raised by ``write`` and fails later with
    "unexpected pos ...", which hides a full disk.
    """

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.handle.write(data)
        except OSError as error:
            self.error = self.error or error
            raise

    def flush(self) -> None:
        self.handle.flush()


def check_readable_file(path: Path) -> None:
    """Raise a UserError saying why ``path`` cannot be read as a checkpoint file, if so."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise UserError(
                f"checkpoint '{path}' is a symbolic link to '{os.readlink(path)}', which does "
                "not exist; pass an existing .ckpt file"
            ) from None
        raise UserError(
            f"checkpoint '{path}' does not exist; pass an existing .ckpt file"
        ) from None
    except PermissionError:
        raise UserError(
            f"checkpoint '{path}' cannot be reached: permission denied on a folder of its "
            "path; run as a user who may enter those folders, or copy the file elsewhere"
        ) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UserError(
                f"checkpoint '{path}' is a symbolic link loop (it leads back to itself); "
                "pass the real .ckpt file"
            ) from None
        raise UserError(f"checkpoint '{path}' cannot be opened ({error.strerror})") from error
    if stat.S_ISDIR(info.st_mode):
        raise UserError(
            f"checkpoint '{path}' is a directory, not a checkpoint file; pass a .ckpt file "
            f"in it{_checkpoints_in(path)}"
        )
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"checkpoint '{path}' is not a regular file; pass a .ckpt file")
    if not os.access(path, os.R_OK):
        raise UserError(_permission_message(path))


def load_weights(
    model: nn.Module, checkpoint: dict[str, Any], path: str | Path, *, strict: bool = True
) -> dict[str, list[str]]:
    """Load the checkpoint's ``state_dict`` into ``model``; return the keys that did not fit.

    ``strict``: every key must match in name and shape, else a UserError says which do not.
    Not strict: matching keys load, the rest are left as they are and returned under
    ``missing``, ``unexpected`` and ``mismatched`` (shape differs).
    """
    state = checkpoint["state_dict"]
    own = model.state_dict()
    mismatched = [k for k, v in state.items() if k in own and own[k].shape != v.shape]
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if strict and (mismatched or missing or unexpected):
        raise UserError(
            f"checkpoint '{path}' does not fit this model's architecture "
            f"({_describe(missing, unexpected, mismatched)}); pass a checkpoint of the same "
            "model config, or init_strict=false to load only the weights that fit"
        )
    model.load_state_dict({k: v for k, v in state.items() if k not in mismatched}, strict=False)
    return {"missing": missing, "unexpected": unexpected, "mismatched": mismatched}


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint reads and writes, through ``load_checkpoint``/``save_checkpoint``.

    Writes are atomic (temporary file, then rename: a run killed mid-write leaves the
    previous file of that name intact) and carry the content checksum. A checkpoint the
    run already loaded (and verified) is handed over once instead of read again.
    """

    def __init__(self) -> None:
        super().__init__()
        self._handed: dict[str, dict[str, Any]] = {}

    def hand_over(self, path: str | Path, checkpoint: dict[str, Any]) -> None:
        """The next load of ``path`` returns ``checkpoint`` without reading the file."""
        self._handed[_key(path)] = checkpoint

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        save_checkpoint(checkpoint, path)

    def load_checkpoint(
        self, path: Any, map_location: Any = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        handed = self._handed.pop(_key(path), None)
        return handed if handed is not None else load_checkpoint(path)


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


def hand_over(trainer: Any, path: str | Path, checkpoint: dict[str, Any]) -> None:
    """Let ``trainer.fit(ckpt_path=path)`` use the already loaded ``checkpoint``."""
    checkpoint_io = getattr(trainer.strategy, "checkpoint_io", None)
    if isinstance(checkpoint_io, SafeCheckpointIO):
        checkpoint_io.hand_over(path, checkpoint)


def _describe(missing: list[str], unexpected: list[str], mismatched: list[str]) -> str:
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape", mismatched)):
        if keys:
            shown = ", ".join(keys[:LISTED_KEYS])
            more = f" and {len(keys) - LISTED_KEYS} more" if len(keys) > LISTED_KEYS else ""
            parts.append(f"{label}: {shown}{more}")
    return "; ".join(parts)


def _unpickling_message(path: Path, error: BaseException) -> str:
    """Name the global torch's safe unpickler refused, without torch's advice to disable it."""
    found = BLOCKED_GLOBAL.search(str(error))
    if found:
        return (
            f"checkpoint '{path}' holds code or objects a checkpoint must not hold (pickled "
            f"global '{_python3_name(found.group(1))}') and was refused for safety, unread: "
            "nothing in it ran. "
            "Checkpoints hold tensors and plain containers only; load only checkpoints "
            "written by this project's training"
        )
    return (
        f"checkpoint '{path}' cannot be unpickled safely (corrupt, or written by a tool that "
        "pickles more than tensors and plain containers); use another checkpoint or retrain"
    )


def _python3_name(name: str) -> str:
    """torch pickles with protocol 2, which writes Python 2 names: commands.Popen is
    subprocess.Popen; torch's message drops the module of builtins (``eval``)."""
    module, _, attribute = name.rpartition(".")
    return f"{IMPORT_MAPPING.get(module, module) or 'builtins'}.{attribute}"


def _permission_message(path: Path) -> str:
    try:
        info = path.stat()
        detail = f"mode {stat.filemode(info.st_mode)}, owner uid {info.st_uid}, you are uid "
        detail += str(os.geteuid())
    except OSError:
        detail = "permission denied"
    return (
        f"checkpoint '{path}' cannot be read: no read permission ({detail}); "
        "`chmod u+r` it as its owner, or run as a user who may read it"
    )


def _checkpoints_in(folder: Path) -> str:
    """A hint naming a checkpoint inside ``folder`` (e.g. its checkpoints/last.ckpt), or ""."""
    for pattern in ("last.ckpt", "checkpoints/last.ckpt", "*.ckpt", "checkpoints/*.ckpt"):
        found = sorted(folder.glob(pattern))
        if found:
            return f", e.g. {found[0]}"
    return ""
