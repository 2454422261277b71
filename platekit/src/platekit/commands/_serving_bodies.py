"""Request bodies: read at most a limit of bytes, then decode them as predict decodes files.

A body is one of: a JSON array of inputs (``application/json``; for a table model also an
array of ``{column: value}`` rows, texts and gaps as they come; a list per sequence), CSV
rows with the training columns (``text/csv``), or one image file (``image/*``,
``application/octet-stream``).
Every problem is a UserError with one line; ``status`` says which HTTP error it is.
"""

import csv
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from platekit._errors import UserError, first_line
from platekit.data._images import ImageTooLargeError
from platekit.data._info import DataInfo
from platekit.data._inputs import json_rows, read_image, table_array
from platekit.data._tables import parse_table

JSON_TYPES = ("application/json",)
CSV_TYPES = ("text/csv",)
IMAGE_TYPES = ("image/", "application/octet-stream")  # image/ matches every image/* type
ACCEPTED = "application/json (an array), text/csv (rows) or image/* (one image file)"


class BadBodyError(UserError):
    """The body cannot be read as inputs of this model: HTTP 400."""

    status = 400


class TooLargeError(UserError):
    """The body, or the image in it, is over the server's limit: HTTP 413."""

    status = 413


class UnsupportedTypeError(UserError):
    """The Content-Type is none the server reads: HTTP 415."""

    status = 415


@dataclass(frozen=True)
class Limits:
    """What one request may hold, and how long it may take to arrive."""

    max_body_bytes: int
    max_image_pixels: int
    max_rows: int = 10_000
    request_timeout: float = 10.0


async def read_limited(chunks: AsyncIterator[bytes], declared: str | None, limit: int) -> bytes:
    """The whole body, refused as soon as more than ``limit`` bytes have arrived.

    A Content-Length over the limit is refused before reading; the bytes are counted
    whatever it says, so a chunked upload (no Content-Length) is held to the same limit.
    """
    too_large = TooLargeError(
        f"the request body is over the server's {limit}-byte limit (max_body_bytes); "
        "send fewer inputs per request"
    )
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise too_large
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large
        parts.append(chunk)
    return b"".join(parts)


def media_type(content_type: str | None) -> str:
    """``'text/csv; charset=utf-8'`` -> ``'text/csv'``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode(
    body: bytes, content_type: str | None, info: DataInfo, limits: Limits, *, invert: bool
) -> tuple[np.ndarray, list[str]]:
    """Raw float32 inputs of ``(N, *input_shape)`` and a name per input."""
    kind = media_type(content_type)
    if not body:
        raise BadBodyError(f"the request body is empty; send {ACCEPTED}")
    if kind in JSON_TYPES:
        inputs = json_inputs(body, info)
    elif kind in CSV_TYPES:
        inputs = csv_inputs(body, info)
    elif kind.startswith(IMAGE_TYPES):
        return image_input(body, info, limits, invert=invert)[None], ["body"]
    else:
        raise UnsupportedTypeError(
            f"Content-Type '{kind or '(none)'}' is not accepted; send {ACCEPTED} with that "
            "Content-Type header"
        )
    return inputs, [f"body[{row}]" for row in range(len(inputs))]


def json_inputs(body: bytes, info: DataInfo) -> np.ndarray:
    """A JSON array of inputs (or ``{"inputs": array}``), read as predict reads a .json file;
    one input alone is a batch of one."""
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise BadBodyError(f"the JSON body is not valid JSON ({first_line(error)})") from None
    except ValueError as error:  # an integer of more digits than Python converts (4300)
        raise BadBodyError(
            f"the JSON body holds a number Python will not read ({first_line(error)[:80]}); "
            "send floats"
        ) from None
    try:
        return json_rows(value, info, "JSON body")  # arrays, table rows, a list per sequence
    except UserError as error:
        raise BadBodyError(str(error)) from None


def csv_inputs(body: bytes, info: DataInfo) -> np.ndarray:
    """CSV rows under a header naming the training columns (other columns are ignored)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BadBodyError(f"the CSV body is not UTF-8 text ({first_line(error)})") from None
    try:
        header, rows = parse_table(io.StringIO(text, newline=""), "CSV body", what="input")
        return table_array(header, rows, info, "CSV body")
    except (UserError, csv.Error) as error:
        raise BadBodyError(str(error)) from None


def image_input(body: bytes, info: DataInfo, limits: Limits, *, invert: bool) -> np.ndarray:
    """One image file, converted as training converted images.

    Its size is read from the header first: a small file can hold a huge picture.
    """
    buffer = io.BytesIO(body)
    buffer.name = "image body"  # how messages name it
    try:
        return read_image(buffer, info, invert=invert, max_pixels=limits.max_image_pixels)
    except ImageTooLargeError as error:
        raise TooLargeError(str(error)) from None
    except UserError as error:
        raise BadBodyError(str(error)) from None
