"""Serve an exported model.onnx over HTTP with onnxruntime (no torch, no Lightning).

python -m <package>.serve model_path=outputs/export/runs/<time>/model.onnx [port=8000]

curl -s localhost:8000/predict -H 'Content-Type: application/json' -d '[[...]]'
curl -s localhost:8000/predict -H 'Content-Type: image/png' --data-binary @digit.png
curl -s localhost:8000/predict -H 'Content-Type: text/csv' --data-binary @rows.csv

Inputs are decoded as predict decodes files, and the answers carry predict's fields (plus
every class's probability). ``GET /metadata`` describes the model, ``GET /health`` says it
is up, ``/docs`` is the interactive API page.
"""

import contextlib
import ctypes
import logging
import socket
from pathlib import Path

import uvicorn
from omegaconf import DictConfig

from platekit._errors import UserError
from platekit.commands._serving_app import build_app
from platekit.commands._serving_bodies import Limits
from platekit.commands._serving_guard import allowed_hosts
from platekit.commands._serving_protocol import protocol_with_deadline
from platekit.config._rules import flag, integer, number, text
from platekit.config._schema import declare
from platekit.models._onnx_runner import OnnxRunner

log = logging.getLogger(__name__)

declare(
    {
        "model_path": text("outputs/export/runs/<time>/model.onnx"),
        "host": text("127.0.0.1"),
        "port": integer(0, 65535, example=8000),
        "batch_size": integer(1, example=512),
        "max_body_bytes": integer(1, example=8388608),
        "max_connections": integer(1, example=512),
        "max_rows": integer(1, example=10000),
        "max_image_pixels": integer(1, example=16777216),
        "request_timeout": number(above=0.0, example=10),
        "access_log": flag(),
    }
)

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def serve(cfg: DictConfig) -> None:
    """Answer requests on ``cfg.host:cfg.port`` until interrupted (Ctrl-C, SIGTERM)."""
    check_settings(cfg)
    path = Path(str(cfg.model_path))
    if path.suffix != ".onnx":
        raise UserError(
            f"model_path '{path}' is not a .onnx file; the server runs exported models: "
            "make export CKPT=path/to/file.ckpt, then serve its model.onnx"
        )
    if not path.is_file():
        raise UserError(f"model '{path}' does not exist; run the export first (make export)")
    model = OnnxRunner(path, threads=cfg.threads)
    return_freed_memory()
    limits = Limits(
        max_body_bytes=cfg.max_body_bytes,
        max_image_pixels=cfg.max_image_pixels,
        max_rows=cfg.max_rows,
        request_timeout=cfg.request_timeout,
    )
    app = build_app(model, path, limits, cfg.batch_size, allowed_hosts(cfg.host))
    check_port_free(cfg.host, cfg.port)
    log.info(
        "serving %s on http://%s:%d (POST /predict, GET /health, GET /metadata)",
        path,
        cfg.host,
        cfg.port,
    )
    uvicorn.run(
        app,
        host=cfg.host,
        port=cfg.port,
        log_config=None,  # keep the run's logging: console and <run>/serve.log
        access_log=cfg.access_log,
        http=protocol_with_deadline(cfg.request_timeout),  # uvicorn has no request deadline
        limit_concurrency=cfg.max_connections,
        timeout_graceful_shutdown=5,
    )


def check_settings(cfg: DictConfig) -> None:
    """Every bad setting in one line, before the model is loaded."""
    if not cfg.get("model_path"):
        raise UserError("model_path is not set; pass model_path=path/to/model.onnx")
    problems = []
    if not 0 < cfg.port < 65536:
        problems.append(f"port={cfg.port} must be in 1..65535")
    for name in ("max_body_bytes", "max_image_pixels", "max_rows", "batch_size", "max_connections"):
        if cfg[name] < 1:
            problems.append(f"{name}={cfg[name]} must be >= 1")
    if not cfg.request_timeout > 0:
        problems.append(f"request_timeout={cfg.request_timeout} must be > 0 (seconds)")
    if cfg.threads is not None and cfg.threads < 1:
        problems.append(f"threads={cfg.threads} must be >= 1 (or null: OMP_NUM_THREADS)")
    if problems:
        raise UserError("; ".join(problems))


def return_freed_memory() -> None:
    """Make freed blocks of 1 MiB and more go back to the system at once (glibc).

    glibc keeps a freed block below its mmap threshold in the freeing thread's arena, and
    raises the threshold to the size of a freed mapped block (up to 32 MiB): the decoded
    images of concurrent requests, each on a worker thread, then stayed resident (+934 MiB
    after eight 4096 x 4096 uploads). A fixed threshold maps every larger block on its own.
    """
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator's policy
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 1 << 20)


def check_port_free(host: str, port: int) -> None:
    """A UserError naming the port if another process listens there (uvicorn binds it next)."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as error:
        raise UserError(
            f"cannot listen on {host}:{port} ({error.strerror or error}); stop what holds it "
            "or pass another port=..."
        ) from None
