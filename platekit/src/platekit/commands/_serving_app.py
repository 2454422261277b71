"""The HTTP routes over one exported model: ``POST /predict``, ``GET /health``, ``GET /metadata``.

Answers are JSON. A request the server cannot use gets a 4xx status and
``{"error": "<one line>"}``; an unexpected failure is logged in full and answered with a
500 that names no internals.
"""

import logging
from pathlib import Path
from typing import Any

import onnx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from platekit._errors import UserError
from platekit.commands._predict import OUTSIDE, in_batches, prediction_rows
from platekit.commands._serving_bodies import ACCEPTED, Limits, decode, read_limited
from platekit.commands._serving_guard import RequestGuard
from platekit.data._encoding import unseen_rows
from platekit.data._ranges import SHOWN_ROWS, outside, summary
from platekit.models._onnx_runner import OnnxRunner

log = logging.getLogger(__name__)

UNSEEN = "unseen_categories"  # rows holding a category value training never saw


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
    app = FastAPI(title=f"{path.name} server", description=f"Predictions of {path.name}.")
    card = metadata(model, path, limits)

    def answer(body: bytes, content_type: str | None, invert: bool) -> dict[str, Any]:
        with unseen_rows() as unseen:
            inputs, names = decode(body, content_type, model.info, limits, invert=invert)
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
            body = await read_limited(request.stream(), declared, limits.max_body_bytes)
        except ClientDisconnect:  # the client left mid-body: nobody to answer, one line
            log.info("POST /predict: the client disconnected before sending its whole body")
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        return await run_in_threadpool(answer, body, request.headers.get("content-type"), invert)

    @app.api_route("/health", methods=["GET", "HEAD"])  # HEAD: GET's answer, no body
    async def health() -> dict[str, str]:
        """Up and holding a model."""
        return {"status": "ok"}

    @app.api_route("/metadata", methods=["GET", "HEAD"])
    async def describe() -> dict[str, Any]:
        """What the model takes and gives, and where it came from."""
        return card

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
    }


def problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def user_error(request: Request, error: UserError) -> JSONResponse:
    return problem(getattr(error, "status", 400), str(error))


async def http_error(request: Request, error: HTTPException) -> JSONResponse:
    return problem(error.status_code, f"{request.method} {request.url.path}: {error.detail}")


async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return problem(400, f"{where}: {first.get('msg', 'invalid')}; e.g. /predict?invert=true")


async def server_error(request: Request, error: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return problem(500, f"the server failed on this request ({type(error).__name__}); see its log")
