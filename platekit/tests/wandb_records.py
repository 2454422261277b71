"""Read what W&B offline wrote: the records of a ``run-<id>.wandb`` file, for tests.

The file is a ``:W&B`` header then a LevelDB-style log: 32 KiB blocks of chunks, each a
7-byte header (checksum, length, type: full, first, middle, last) and protobuf bytes.
"""

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def chunks(path: Path) -> Iterator[bytes]:
    """Every record's bytes, chunks joined, in the order written."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        _, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        if left < HEADER or (length == 0 and kind == 0):  # the block's padding
            position += left
            continue
        body = data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind == FULL:
            yield body
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            yield pending + body


def history(path: Path) -> list[dict[str, Any]]:
    """The rows ``wandb.log`` wrote, as ``{key: value}``."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for body in chunks(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(body)
        if record.WhichOneof("record_type") == "history":
            items = record.history.item
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in items
                }
            )
    return rows
