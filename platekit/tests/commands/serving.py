"""A real model server for the tests: started on a free loopback port, stopped with SIGINT."""

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support import CONFIG_DIR, PACKAGE, ROOT

# Small enough to test the limit with bodies that fit the loopback socket's buffers.
LIMIT = 200_000


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    log: Path

    def request(
        self,
        method: str,
        path: str,
        body: bytes | Iterable[bytes] | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer of one request on a fresh connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = dict(headers or {})
        if content_type:
            sent["Content-Type"] = content_type
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(command: list[str], cwd: Path, port: int) -> Iterator[Server]:
    """Start ``command`` (a server on ``port``), wait for /health, stop it with SIGINT."""
    cwd.mkdir(parents=True, exist_ok=True)
    log = cwd / "server.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "CONFIG_DIR": str(CONFIG_DIR),
        "OMP_NUM_THREADS": "1",
    }
    with log.open("w") as output:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT, text=True
        )
        server = Server(port, process, log)
        try:
            wait_until_up(server)
            yield server
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def wait_until_up(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"the server exited {server.process.returncode}:\n{server.log.read_text()}")
        try:
            if server.request("GET", "/health") == (200, {"status": "ok"}):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"the server did not answer /health in {timeout} s:\n{server.log.read_text()}")


def serve_command(model: Path, port: int, *overrides: str) -> list[str]:
    return [
        sys.executable, "-m", f"{PACKAGE}.serve", f"model_path={model}", f"port={port}",
        f"max_body_bytes={LIMIT}", "access_log=false", *overrides,
    ]  # fmt: skip


def exchange(port: int, data: bytes, timeout: float = 20) -> bytes:
    """Send ``data`` as it is on one connection; everything the server sends until it closes."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(data)
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := client.recv(65536):
                received += chunk
    return received


def memory_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (``VmRSS``) or its peak since the last reset (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak_memory(pid: int) -> None:
    """Start a process's ``VmHWM`` over from its resident memory now (Linux clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
