"""The HTTP routes over one exported model: ``POST /predict``, ``GET /health``, ``GET /metadata``
and ``GET /docs`` (a page of the routes that loads nothing from elsewhere).

Answers are JSON. A request the server cannot use gets a 4xx status and
``{"error": "<one line>"}``; an unexpected failure is logged in full and answered with a
500 that names no internals. What one request may cost is bounded: its body's bytes and
arrival time, its image's pixels (one large image decodes at a time), its rows, and its
answer's size (at most ``ANSWER_PER_BODY`` times the body, plus ``ANSWER_ALLOWANCE``).
"""

import asyncio
import html
import io
import json
import logging
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import onnx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from PIL import Image
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from platekit._errors import UserError, inert
from platekit.commands._predict import OUTSIDE, in_batches, prediction_rows
from platekit.commands._serving_bodies import (
    ACCEPTED,
    IMAGE_TYPES,
    Limits,
    TooLargeError,
    decode,
    media_type,
    read_limited,
)
from platekit.commands._serving_guard import RequestGuard
from platekit.data._encoding import unseen_rows
from platekit.data._ranges import SHOWN_ROWS, outside, summary
from platekit.models._onnx_runner import OnnxRunner

log = logging.getLogger(__name__)

UNSEEN = "unseen_categories"  # rows holding a category value training never saw
ANSWER_PER_BODY = 4  # an answer's bytes at most this many times its body's ...
ANSWER_ALLOWANCE = 65_536  # ... plus this, so a body of a few short rows gets its answer
# An image over this many pixels decodes while no other such image does: decoding holds
# about 20 bytes a pixel (the decoded file, its float copy), so concurrent large uploads
# would multiply it.
LARGE_IMAGE_PIXELS = 1_048_576


def build_app(
    model: OnnxRunner,
    path: Path,
    limits: Limits,
    batch_size: int,
    allowed: frozenset[str] | None = None,
) -> FastAPI:
    """A FastAPI app answering predictions of ``model`` (read from ``path``); requests whose
    ``Host`` is not in ``allowed`` (None: any) are refused (``_serving_guard.py``)."""
    # Clients see file names, never this machine's paths.
    app = FastAPI(
        title=f"{path.name} server",
        description=f"Predictions of {path.name}.",
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: /docs is our own
        redoc_url=None,
    )
    card = metadata(model, path, limits)
    per_row = answer_bytes_per_row(model)
    large_images = threading.BoundedSemaphore(1)

    def answer(body: bytes, content_type: str | None, invert: bool) -> dict[str, Any]:
        large = is_large_image(body, content_type)
        with unseen_rows() as unseen, large_images if large else nullcontext():
            inputs, names = decode(body, content_type, model.info, limits, invert=invert)
        check_answer_size(len(inputs), per_row, len(body), limits)
        outputs = in_batches(model, inputs, batch_size)
        answer: dict[str, Any] = {"predictions": answer_rows(names, outputs, model)}
        checks: dict[str, Any] = {}  # bounded: a count and the first rows of each
        if model.info.input_range:
            flags = outside(inputs, model.info.input_range, model.info.feature_names)
            checks[OUTSIDE] = summary(flags)
        if model.info.table_columns:
            checks[UNSEEN] = {"count": len(unseen), "rows": sorted(unseen)[:SHOWN_ROWS]}
        if checks:
            answer["checks"] = checks
        return answer

    @app.post("/predict", response_model=None)
    async def predict(request: Request, invert: bool = False) -> dict[str, Any] | JSONResponse:
        """Predict every input of the body: class and probabilities, or the value."""
        declared = request.headers.get("content-length")
        try:
            async with asyncio.timeout(limits.request_timeout):
                body = await read_limited(request.stream(), declared, limits.max_body_bytes)
        except ClientDisconnect:  # the client left mid-body: nobody to answer, one line
            log.info("POST /predict: the client disconnected before sending its whole body")
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        except TimeoutError:
            log.info("POST /predict: the body did not arrive in %g s: 408", limits.request_timeout)
            message = (
                f"the request body did not arrive within {limits.request_timeout:g} s (the "
                "server's request_timeout); send it at once"
            )
            return JSONResponse({"error": message}, 408, headers={"connection": "close"})
        return await run_in_threadpool(answer, body, request.headers.get("content-type"), invert)

    @app.api_route("/health", methods=["GET", "HEAD"])  # HEAD: GET's answer, no body
    async def health() -> dict[str, str]:
        """Up and holding a model."""
        return {"status": "ok"}

    @app.api_route("/metadata", methods=["GET", "HEAD"])
    async def describe() -> dict[str, Any]:
        """What the model takes and gives, and where it came from."""
        return card

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        """The routes, what each takes, and the model's card: plain HTML, no scripts."""
        return HTMLResponse(docs_page(app.openapi(), card))

    # Starlette types every handler as taking the base Exception; each of these takes the
    # one class it is registered for, which Starlette guarantees at run time.
    app.add_exception_handler(UserError, user_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, server_error)
    app.add_middleware(RequestGuard, allowed=allowed)
    return app


def answer_rows(names: list[str], outputs: Any, model: OnnxRunner) -> list[dict[str, Any]]:
    """predict's rows (class, name and probability, or value), plus every class's probability."""
    rows = prediction_rows(names, outputs, model.info)
    if model.info.target_kind == "class":
        for row, probabilities in zip(rows, outputs, strict=True):
            row["probabilities"] = dict(
                zip(model.info.class_names, map(float, probabilities), strict=True)
            )
    return rows


def answer_bytes_per_row(model: OnnxRunner) -> int:
    """The JSON bytes of one answer row at most: every class name and probability written out."""
    info = model.info
    longest = max(info.class_names, key=len, default="")
    row: dict[str, Any] = {"input": "body[1000000]"}
    if info.target_kind == "class":
        row |= {"class": len(info.class_names), "class_name": longest, "probability": 0.1 / 3}
        row["probabilities"] = {name: 0.1 / 3 for name in info.class_names}
    else:
        row["value"] = -0.1 / 3 * 1e300
    return len(json.dumps(row)) + 2  # the list's comma and space


def check_answer_size(rows: int, per_row: int, body_bytes: int, limits: Limits) -> None:
    """Refuse (413) a body whose answer would be far larger than it, or hold too many rows."""
    if rows > limits.max_rows:
        raise TooLargeError(
            f"the body holds {rows} inputs, over the server's limit of {limits.max_rows} "
            "(max_rows); send fewer per request"
        )
    allowed = ANSWER_PER_BODY * body_bytes + ANSWER_ALLOWANCE
    if rows * per_row > allowed:
        raise TooLargeError(
            f"the answer to these {rows} inputs would take up to {rows * per_row} bytes, over "
            f"{ANSWER_PER_BODY}x the {body_bytes}-byte body (+{ANSWER_ALLOWANCE}); send "
            "fewer, fuller rows per request"
        )


def is_large_image(body: bytes, content_type: str | None) -> bool:
    """Whether the body is an image whose header names more than ``LARGE_IMAGE_PIXELS``."""
    if not media_type(content_type).startswith(IMAGE_TYPES):
        return False
    try:
        with Image.open(io.BytesIO(body)) as image:  # reads the header only
            return image.width * image.height > LARGE_IMAGE_PIXELS
    except Exception:  # not an image: decode says so in its own words
        return False


def docs_page(schema: dict[str, Any], card: dict[str, Any]) -> str:
    """The API page: each route with its summary, then the model's card, all escaped."""
    rows = []
    for route, methods in schema.get("paths", {}).items():
        for method, operation in methods.items():
            summary = operation.get("description") or operation.get("summary", "")
            cells = (method.upper(), route, summary)
            rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    model = html.escape(json.dumps(card, indent=2))
    title = html.escape(schema.get("info", {}).get("title", "model server"))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><h1>{title}</h1><p>POST /predict takes {html.escape(ACCEPTED)}; "
        "the schema is at <a href='/openapi.json'>/openapi.json</a>.</p>"
        f"<table><tr><th>method</th><th>path</th><th>what</th></tr>{''.join(rows)}</table>"
        f"<h2>The model</h2><pre>{model}</pre></body></html>"
    )


def metadata(model: OnnxRunner, path: Path, limits: Limits) -> dict[str, Any]:
    """The model's input, outputs, opset and source checkpoint, and the request limits."""
    proto = onnx.load(str(path), load_external_data=False)
    opset = next(op.version for op in proto.opset_import if op.domain in ("", "ai.onnx"))
    props = {entry.key: entry.value for entry in proto.metadata_props}
    info = model.info
    return {
        "model": path.name,
        "source_checkpoint": Path(source).name
        if (source := props.get("source_checkpoint"))
        else None,
        "opset": int(opset),
        "input_name": model.input_name,
        "input_shape": list(info.input_shape),
        "varying_axes": info.to_dict()["varying_axes"],  # {"0": 40}: a length of up to 40
        "input_description": info.input_description,
        "feature_names": list(info.feature_names),
        "table_columns": info.to_dict()["table_columns"],  # how a raw CSV row encodes
        "target_kind": info.target_kind,
        "class_names": list(info.class_names),
        "outputs": list(model.outputs),
        "accepts": ACCEPTED,
        "max_body_bytes": limits.max_body_bytes,
        "max_image_pixels": limits.max_image_pixels,
        "max_rows": limits.max_rows,
    }


def problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def user_error(request: Request, error: UserError) -> JSONResponse:
    """A request the server cannot use (or one over a bound): its 4xx and one log line."""
    status = getattr(error, "status", 400)
    log.info("%s %s refused (%d): %s", request.method, request.url.path, status, inert(error))
    return problem(status, str(error))


async def http_error(request: Request, error: HTTPException) -> JSONResponse:
    return problem(error.status_code, f"{request.method} {request.url.path}: {error.detail}")


async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return problem(400, f"{where}: {first.get('msg', 'invalid')}; e.g. /predict?invert=true")


async def server_error(request: Request, error: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return problem(500, f"the server failed on this request ({type(error).__name__}); see its log")
