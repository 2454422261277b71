"""Commands the tests run, forked from a process that imported torch and Lightning once.

A command of the project pays 3-5 s of CPU importing torch, Lightning, torchmetrics and Hydra
before its first line of work, and the suite runs hundreds of them. A warm process (one per
test worker) imports those libraries once, and nothing of platekit or the project, then
forks one child per command. The child is a real process: its own pid, exit status,
stdout and stderr pipes, working directory, environment, ``sys.argv`` and ``sys.path``; it
runs the entry module as ``python -m`` does and ends through the interpreter's normal
shutdown (atexit handlers, logging flushed), so what a test asserts of it is what a user's
command does after its imports.

:func:`run` and :func:`start` fork a ``python -m`` command only where nothing read at import
can differ: the command gets the environment the warm process started with (but for the
variables in ``PER_COMMAND``), and the warm process serves only if its imports warned of
nothing and started no thread. Every other command, and every command while
``PLATEKIT_TEST_COLD=1`` is set, starts a fresh interpreter, as do those run in a terminal,
under a memory cap or by a launcher (DDP, torchrun, SLURM). What children share: Python's
string-hash seed (torch, numpy and ``random`` are reseeded in each).
"""

import atexit
import contextlib
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

COLD = "PLATEKIT_TEST_COLD"
# Read by the child after the fork (sys.path), or by the project when a command runs, never
# at import: a command may set them otherwise than the warm process.
PER_COMMAND = {
    "PYTHONPATH",
    "CONFIG_DIR",
    "RUN_NAME",
    "ESCAPE",
    "WANDB_SILENT",
    "PYTEST_CURRENT_TEST",
}
# Imported once by the warm process: what every command imports first and pays most for.
LIBRARIES = (
    "torch", "lightning", "lightning.pytorch", "torchmetrics", "hydra", "hydra.utils", "omegaconf",
    "numpy", "rich.console", "rich.progress", "matplotlib.figure",
    "matplotlib.backends.backend_agg", "optuna", "onnx", "onnxscript", "torch.onnx",
)  # fmt: skip
# Not onnxruntime: it starts a thread at import, and a fork copies no thread, only its locks.


class _Warm:
    """The warm process of this test worker: its socket, environment and process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        folder = Path(tempfile.mkdtemp(prefix="platekit-warm-"))
        self.address = str(folder / "socket")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.address],
            env={k: v for k, v in env.items() if k != "PYTHONPATH"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        atexit.register(self.process.kill)
        assert self.process.stdout is not None
        self.ready = self.process.stdout.readline().strip() == "ready"

    def serves(self, env: dict[str, str]) -> bool:
        if not self.ready or self.process.poll() is not None:
            return False
        keys = (self.env.keys() | env.keys()) - PER_COMMAND
        return all(self.env.get(key) == env.get(key) for key in keys)


_warm: _Warm | None = None


def _warm_for(env: dict[str, str]) -> _Warm | None:
    global _warm
    if os.environ.get(COLD) == "1":
        return None
    if _warm is None:
        _warm = _Warm(env)
    return _warm if _warm.serves(env) else None


def run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python args...`` in ``cwd`` with ``env``, its output captured as text: what
    ``subprocess.run(..., capture_output=True, text=True)`` returns. ``python -m module ...``
    is forked from the warm process where it can be; anything else starts cold."""
    process = start(args, cwd, env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        from platekit.testing import kill_tree  # not at the top: the warm process runs this file

        kill_tree(process.pid)
        process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.wait(), stdout, stderr)


def start(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    stderr: int = subprocess.PIPE,
    start_new_session: bool = False,
) -> "subprocess.Popen[str] | WarmProcess":
    """``python args...`` started in the background, stdout a text pipe; ``stderr`` a pipe of
    its own, or ``subprocess.STDOUT``. Forked warm where it can be (see :func:`run`)."""
    warm = _warm_for(env) if args[:1] == ["-m"] else None
    if warm is None:
        return subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr,
            text=True, start_new_session=start_new_session,
        )  # fmt: skip
    return WarmProcess(warm, args, cwd, env, stderr, start_new_session)


class WarmProcess:
    """A command forked by the warm process: the part of ``subprocess.Popen`` the tests use.

    It is the warm process's child, so its exit status comes over the socket that asked for
    it; its pid is real (signals reach it) and its output comes through pipes of this
    process, decoded as ``Popen(text=True)`` decodes.
    """

    def __init__(
        self,
        warm: _Warm,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        stderr: int,
        new_session: bool,
    ) -> None:
        self.args = [sys.executable, *args]
        self.returncode: int | None = None
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe() if stderr == subprocess.PIPE else (None, out_write)
        null = os.open(os.devnull, os.O_RDONLY)
        request = {"module": args[1], "args": args[2:], "cwd": os.path.abspath(cwd),
                   "env": env, "new_session": new_session}  # fmt: skip
        self._fds = [fd for fd in (out_read, err_read) if fd is not None]
        self.stdout = open(out_read, encoding=locale.getpreferredencoding(False), closefd=False)  # noqa: SIM115
        self.stderr = None if err_read is None else open(err_read, closefd=False)  # noqa: SIM115
        self._link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._link.connect(warm.address)
            message = [json.dumps(request).encode()]
            socket.send_fds(self._link, message, [null, out_write, err_write])
        finally:
            for fd in {null, out_write, err_write}:
                os.close(fd)
        # Sent once the child has its pipes, folder and session, as Popen returns after them.
        self.pid = int(self._received("its pid"))

    def _received(self, what: str, flags: int = 0) -> bytes:
        """The warm process's next message; it ending first is an error, not a status."""
        message = self._link.recv(64, flags)
        if not message:
            if hasattr(self, "pid"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            self._link.close()
            self._close()
            raise RuntimeError(f"the warm process ended before sending {what}")
        return message

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(BlockingIOError):
                self._status(self._received("an exit status", socket.MSG_DONTWAIT))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._link.settimeout(timeout)
            try:
                self._status(self._received("an exit status"))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        """Everything written to the pipes until each is closed, then the exit status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks: dict[int, list[bytes]] = {fd: [] for fd in self._fds}
        with selectors.DefaultSelector() as selector:
            for fd in chunks:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
        texts = [_text(b"".join(chunks[fd])) for fd in self._fds]
        self._close()
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.001))
        return (texts or [""])[0], texts[1] if len(texts) > 1 else None

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _status(self, message: bytes) -> None:
        self.returncode = int(message)
        self._link.close()

    def _close(self) -> None:
        """Close the pipes' ends (what the command wrote and nobody read is gone)."""
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []

    def __del__(self) -> None:
        self._link.close()
        self._close()


def _text(data: bytes) -> str:
    """Bytes as ``subprocess`` gives text: the locale's encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---- the warm process ---------------------------------------------------------------------


def _serve(address: str) -> tuple[dict[str, Any], list[int]] | None:
    """Import the libraries, then fork a child per request; return the request in the child."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in LIBRARIES:
            with contextlib.suppress(ImportError):
                __import__(name)
    if caught:  # a command would print these itself: it must start cold to show them
        print("warned: " + "; ".join(str(w.message)[:200] for w in caught), flush=True)
        return None
    if len(os.listdir("/proc/self/task")) > 1:  # a fork would copy a lock a thread holds
        print("threads", flush=True)
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(16)
    print("ready", flush=True)
    parent = os.getppid()
    children: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        if _readable(listener, 0.02):
            link, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(link, 1 << 20, 3)
            if not message:  # the test went away before asking
                link.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            settled, tell = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(settled)
                listener.close()
                link.close()
                for other in children.values():
                    other.close()
                return {**json.loads(message), "settled": tell}, fds
            os.close(tell)
            for fd in fds:
                os.close(fd)
            os.read(settled, 1)  # the child has its pipes, folder and session (or died)
            os.close(settled)
            link.send(str(pid).encode())
            children[pid] = link
        for pid, link in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                with contextlib.suppress(OSError):  # the test gave up on it (a timeout)
                    link.send(str(os.waitstatus_to_exitcode(status)).encode())
                link.close()
                del children[pid]
    return None


def _readable(sock: socket.socket, timeout: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the command's pipes, folder, environment and path, then run
    its module as ``python -m`` runs it."""
    import importlib
    import runpy

    import numpy as np
    import torch

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if request["new_session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.write(request["settled"], b"1")
    os.close(request["settled"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *sys.path]
    sys.argv = ["-m", *request["args"]]
    sys.orig_argv = [sys.executable, "-m", request["module"], *request["args"]]
    importlib.invalidate_caches()
    # Fresh seeds, as a new process draws them (``random`` reseeds itself at a fork).
    np.random.seed()
    torch.seed()
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder: a command's path is its own
    served = _serve(sys.argv[1])
    if served is not None:
        _become(*served)
