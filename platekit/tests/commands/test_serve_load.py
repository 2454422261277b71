"""The model server under load, through a real server on loopback addresses: idle and slow
clients do not hold it, concurrent large images stay within a memory bound, an answer is
bounded by its body, and what the server refuses is refused in its JSON error body."""

import contextlib
import io
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from PIL import Image

from serving import (
    Server,
    cpu_seconds,
    exchange,
    free_port,
    memory_mib,
    reset_peak_memory,
    running,
    serve_command,
)
from support import CONFIG_DIR, compose_config, module, run_cli

if not (CONFIG_DIR / "serve.yaml").is_file():
    pytest.skip("the project was baked with serve=no", allow_module_level=True)

app = module("commands._serving_app")
DEADLINE = 3  # request_timeout of the servers here, in seconds
HELD = 150  # slow or idle clients, from 127.0.0.2 up


@pytest.fixture(scope="module")
def loaded(exported: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose request deadline is short enough for a test to outwait."""
    port = free_port()
    command = serve_command(exported["model"], port, f"request_timeout={DEADLINE}")
    with running(command, tmp_path_factory.mktemp("loaded"), port) as up:
        yield up


def held_connections(
    port: int, stop: threading.Event
) -> tuple[list[socket.socket], threading.Thread]:
    """``HELD`` connections from 127.0.0.2 up: a third idle, a third sending a request's head a
    byte at a time, a third a body a byte at a time; each trickle a byte every 0.5 s."""
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    body_head = (
        b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n["
    )
    clients = []
    for index in range(HELD):
        client = socket.socket()
        client.bind((f"127.0.0.{2 + index}", 0))
        client.settimeout(DEADLINE + 10)
        client.connect(("127.0.0.1", port))
        if index % 3 == 2:
            client.sendall(body_head)
        clients.append(client)

    def trickle() -> None:
        sent = 0
        while not stop.wait(0.5):
            for index, client in enumerate(clients):
                if index % 3 == 0:
                    continue  # idle: connected, sends nothing
                byte = head[sent : sent + 1] if index % 3 == 1 else b"0,"
                with contextlib.suppress(OSError):  # closed by the server: the deadline's work
                    client.send(byte or b"a")
            sent += 1

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    return clients, thread


def timed_request(server: Server, *args: Any) -> tuple[float, int]:
    started = time.perf_counter()
    status, _ = server.request(*args)
    return time.perf_counter() - started, status


@pytest.mark.slow
def test_idle_and_slow_clients_do_not_hold_the_server(
    loaded: Server, digits_body: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    predict = ("POST", "/predict", digits_body, "application/json")
    unloaded = statistics.median(timed_request(loaded, *predict)[0] for _ in range(7))
    stop = threading.Event()
    clients, thread = held_connections(loaded.port, stop)
    try:
        health = [timed_request(loaded, "GET", "/health") for _ in range(20)]
        under_load = statistics.median(timed_request(loaded, *predict)[0] for _ in range(7))
        time.sleep(DEADLINE + 1.5)  # every held connection is past its deadline
        answers = []
        for client in clients:
            try:
                answers.append(client.recv(4096))
            except OSError:
                answers.append(b"")
    finally:
        stop.set()
        thread.join(timeout=5)
        for client in clients:
            client.close()
    with capsys.disabled():
        print(
            f"\n{HELD} held connections: /health {max(s for s, _ in health) * 1e3:.0f} ms at "
            f"most over 20 tries; /predict median {unloaded * 1e3:.1f} ms unloaded, "
            f"{under_load * 1e3:.1f} ms loaded"
        )
    assert [status for _, status in health] == [200] * 20  # no 503: idle ones do not count
    assert max(seconds for seconds, _ in health) < DEADLINE + 1
    assert under_load <= 2 * unloaded + 0.05  # loopback scheduling jitter aside
    heads = [answer for index, answer in enumerate(answers) if index % 3 != 2]
    bodies = [answer for index, answer in enumerate(answers) if index % 3 == 2]
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in heads), heads[:3]
    assert all(b'"error": "the request\'s line and headers did not arrive' in a for a in heads)
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in bodies), bodies[:3]
    assert all(b"the request body did not arrive within 3 s" in answer for answer in bodies)
    log = loaded.log.read_text()
    assert log.count("sent no whole request head in 3 s (request_timeout)") == 100
    assert log.count("POST /predict: the body did not arrive in 3 s") == 50
    assert "Traceback" not in log


@pytest.fixture(scope="module")
def digits_body(exported: dict[str, Any]) -> bytes:
    rows = np.random.default_rng(0).uniform(0, 1, (4, 1, 8, 8)).round(3)
    return json.dumps(rows.tolist()).encode()


def large_png() -> bytes:
    """4096 x 4096 RGBA, every limit's largest image, as a small file (a smooth gradient)."""
    ramp = np.linspace(0, 255, 4096, dtype=np.float32)
    pixels = np.empty((4096, 4096, 4), dtype=np.uint8)
    pixels[..., 0] = ramp[None, :]
    pixels[..., 1] = ramp[:, None]
    pixels[..., 2:] = 255
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


# What one request may add to the server's memory: its body, its answer, and one decode of
# the largest image at a time among the requests in flight (about 200 MiB for a grey model).
PER_REQUEST_MIB = 64


@pytest.mark.slow
def test_concurrent_large_images_stay_within_the_memory_bound(
    exported: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = large_png()
    port = free_port()
    command = serve_command(exported["model"], port, f"max_body_bytes={len(body) + 1}")
    with running(command, tmp_path / "serve", port) as server:
        pid = server.process.pid
        server.request("POST", "/predict", body, "image/png")  # the first request's imports
        baseline = memory_mib(pid)
        reset_peak_memory(pid)
        results: list[int] = []
        burst = [
            threading.Thread(
                target=lambda: results.append(
                    server.request("POST", "/predict", body, "image/png")[0]
                )
            )
            for _ in range(8)
        ]
        for thread in burst:
            thread.start()
        for thread in burst:
            thread.join(timeout=300)
        peak = memory_mib(pid, "VmHWM")
        time.sleep(1)
        after = memory_mib(pid)
    with capsys.disabled():
        print(
            f"\n8 concurrent {len(body)}-byte 4096x4096 PNGs: RSS {baseline:.0f} MiB before, "
            f"peak {peak:.0f} MiB (+{peak - baseline:.0f}), {after:.0f} MiB after"
        )
    assert results == [200] * 8
    assert peak - baseline < 8 * PER_REQUEST_MIB
    assert after - baseline < PER_REQUEST_MIB


@pytest.fixture(scope="module")
def table_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-class table model (columns a, b, c, d) exported to ONNX."""
    folder = tmp_path_factory.mktemp("table")
    settings = module("data").CsvDataModule.make_fixture(folder)
    overrides = ["data=csv", "model=mlp", "trainer.max_epochs=1", "callbacks.progress_bar=null"]
    overrides += ["logger=csv", *(f"data.{key}={value}" for key, value in settings.items())]
    metrics = module("train").train(compose_config(folder / "run", overrides))
    export = [
        f"ckpt_path={metrics['best_checkpoint']}",
        "repeats=1",
        f"+data.path={settings['path']}",
    ]
    module("export").export(compose_config(folder / "export", export, config_name="export"))
    return folder / "export" / "model.onnx"


@pytest.mark.slow
def test_an_answer_is_bounded_by_its_body(
    table_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows of empty cells are a few bytes each, their answers a few hundred: a body of them
    is refused at once; full rows and small bodies get their answer, at most 4x the body
    plus the allowance."""
    port = free_port()
    with running(serve_command(table_model, port, "max_body_bytes=4000000"), tmp_path, port) as up:
        pid = up.process.pid
        sizes = []
        for rows in (1, 40, 400):
            body = ("a,b,c,d\n" + "0.5,1.5,2.5,red\n" * rows).encode()
            status, answer = up.request("POST", "/predict", body, "text/csv")
            assert status == 200
            assert len(answer["predictions"]) == rows
            size = len(json.dumps(answer).encode())
            sizes.append((len(body), size))
            assert size <= app.ANSWER_PER_BODY * len(body) + app.ANSWER_ALLOWANCE
        empty = ("a,b,c,d\n" + ",,,\n" * 9_000).encode()  # 36 kB of gaps: a 3 MB answer
        used = cpu_seconds(pid)
        started = time.perf_counter()
        status, refused = up.request("POST", "/predict", empty, "text/csv")
        seconds, cpu = time.perf_counter() - started, cpu_seconds(pid) - used
        many = ("a,b,c,d\n" + "0.5,1.5,2.5,red\n" * 20_000).encode()
        many_status, too_many = up.request("POST", "/predict", many, "text/csv")
        log = up.log.read_text()
    with capsys.disabled():
        print(f"\nanswer bytes per body bytes: {[(b, a) for b, a in sizes]}; 9,000 empty rows "
              f"({len(empty)} bytes) refused in {seconds:.2f} s, {cpu:.2f} s of CPU")  # fmt: skip
    assert status == 413
    assert refused["error"].startswith("the answer to these 9000 inputs would take up to ")
    assert refused["error"].endswith("send fewer, fuller rows per request")
    assert cpu < 2.0
    assert many_status == 413
    assert too_many["error"] == (
        "the body holds 20000 inputs, over the server's limit of 10000 (max_rows); "
        "send fewer per request"
    )
    assert "Traceback" not in log
    assert log.count("POST /predict refused (413): ") == 2  # one line each


@pytest.mark.slow
@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",  # a header line without a colon
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
    ],
)
def test_a_malformed_request_gets_the_json_error_body(loaded: Server, request_bytes: bytes) -> None:
    answer = exchange(loaded.port, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"].startswith("malformed HTTP request (")


@pytest.mark.slow
def test_docs_need_nothing_from_elsewhere(loaded: Server) -> None:
    answer = exchange(
        loaded.port, b"GET /docs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    head, _, page = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    text = page.decode()
    assert "/predict" in text
    assert "/metadata" in text
    assert "<script" not in text  # no code, so none from a CDN
    assert "http://" not in text
    assert "https://" not in text
    assert exchange(
        loaded.port, b"GET /redoc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    ).startswith(b"HTTP/1.1 404 ")


def with_metadata(model: Path, into: Path, **changes: Any) -> Path:
    """A copy of ``model`` whose data_info metadata has ``changes`` (the graph is untouched)."""
    proto = onnx.load(str(model))
    [entry] = [e for e in proto.metadata_props if e.key == "data_info"]
    info = json.loads(entry.value)
    info.update(changes)
    entry.value = json.dumps(info)
    onnx.save(proto, str(into))
    return into


@pytest.mark.slow
@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            {"input_shape": [1, 16, 16]},
            "its metadata says inputs of shape (1, 16, 16), its graph takes (1, 8, 8)",
        ),
        (
            {"class_names": [f"c{i}" for i in range(1000)]},
            "its metadata names 1000 classes, its graph gives 10 probabilities",
        ),
        ({"input_shape": [1, 40000, 40000]}, "holds 1600000000 values an input, over 50331648"),
    ],
)
@pytest.mark.parametrize("entry", ["serve", "predict"])
def test_a_model_whose_metadata_disagrees_with_its_graph_is_refused_at_start(
    exported: dict[str, Any], tmp_path: Path, changes: dict[str, Any], said: str, entry: str
) -> None:
    model = with_metadata(exported["model"], tmp_path / "model.onnx", **changes)
    np.save(tmp_path / "one.npy", np.zeros((1, 1, 8, 8), dtype=np.float32))
    args = [f"model_path={model}", f"port={free_port()}"] if entry == "serve" else [
        f"model_path={model}", f"inputs={tmp_path / 'one.npy'}",
    ]  # fmt: skip
    result = run_cli(entry, *args, cwd=tmp_path, timeout=120)
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stdout[-2000:]
    assert said in errors[0]
    assert "Traceback" not in result.stdout + result.stderr
