"""The model server: a real uvicorn process on a free loopback port, real HTTP requests.

Good inputs answer as predict answers; bad ones get a 4xx and one line; a load test shows
no errors and prints the latency it measured.
"""

import http.client
import io
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from serving import LIMIT, Server, exchange, free_port, running, serve_command
from support import CONFIG_DIR, PACKAGE, compose_config, module, project_module

if not (CONFIG_DIR / "serve.yaml").is_file():
    pytest.skip("the project was baked with serve=no", allow_module_level=True)

predict = module("predict")
serve = module("serve")
UserError = module("_errors").UserError


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four test-split digits as a raw array, a .npy file and 32x32 dark-on-light PNGs."""
    datamodule = project_module("data").DigitsDataModule(seed=0)
    datamodule.setup("test")
    raw = datamodule.raw_inputs("test").numpy()[:40]
    folder = tmp_path_factory.mktemp("digits")
    np.save(folder / "digits.npy", raw)
    pngs = []
    for index, digit in enumerate(raw[:4, 0]):
        image = Image.fromarray(np.round((1 - digit) * 255).astype(np.uint8))
        path = folder / f"digit_{index}.png"
        image.resize((32, 32), Image.Resampling.NEAREST).save(path)
        pngs.append(path)
    return {"raw": raw, "npy": folder / "digits.npy", "pngs": pngs}


@pytest.fixture(scope="module")
def server(exported: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    with running(
        serve_command(exported["model"], port), tmp_path_factory.mktemp("serve"), port
    ) as up:
        yield up


def predicted(cwd: Path, model: Path, inputs: Any, *extra: str) -> list[dict[str, Any]]:
    """What predict answers for the same inputs (files)."""
    if isinstance(inputs, list):
        inputs = "[" + ",".join(map(str, inputs)) + "]"
    overrides = [f"model_path={model}", f"inputs={inputs}", *extra]
    return predict.predict(compose_config(cwd, overrides, config_name="predict"))


def same_answers(served: list[dict[str, Any]], files: list[dict[str, Any]]) -> None:
    """The same answers; predict's per-row range flag is serve's bounded ``checks`` field."""
    assert len(served) == len(files)
    skip = {"input", "outside_training_range"}
    for mine, theirs in zip(served, files, strict=True):
        assert {key: mine[key] for key in theirs if key not in skip} == pytest.approx(
            {key: value for key, value in theirs.items() if key not in skip}, abs=1e-6
        )


def test_the_server_answers_without_torch_or_lightning(
    exported: dict[str, Any], digits: dict[str, Any], tmp_path: Path
) -> None:
    """The quick smoke test: /health, /metadata, one prediction, one bad request; then the
    server stops on Ctrl-C, having imported neither torch nor Lightning."""
    port = free_port()
    script = (
        "import runpy, sys\n"
        f"sys.argv = {['serve', *serve_command(exported['model'], port)[3:]]!r}\n"
        "try:\n"
        f"    runpy.run_module('{PACKAGE}.serve', run_name='__main__')\n"
        "finally:\n"
        "    print('imported:', sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n"
    )
    with running([sys.executable, "-c", script], tmp_path, port) as server:
        status, card = server.request("GET", "/metadata")
        assert status == 200
        assert card["input_shape"] == [1, 8, 8]
        assert card["class_names"] == [str(digit) for digit in range(10)]
        assert card["target_kind"] == "class"
        assert card["opset"] >= 18
        assert card["source_checkpoint"] == Path(exported["ckpt"]).name  # a name, not a path
        assert card["model"] == "model.onnx"
        assert card["max_body_bytes"] == LIMIT

        status, answer = server.request(
            "POST", "/predict", json.dumps(digits["raw"][:2].tolist()).encode(), "application/json"
        )
        assert status == 200
        rows = answer["predictions"]
        assert [row["input"] for row in rows] == ["body[0]", "body[1]"]
        assert sum(rows[0]["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert rows[0]["probability"] == max(rows[0]["probabilities"].values())

        status, answer = server.request("POST", "/predict", b"[[1, 2]]", "application/json")
        assert status == 400
        assert answer["error"].startswith(
            "input 'JSON body' has shape (1, 2); expected (N, 1, 8, 8)"
        )
    assert server.process.returncode == 0, server.log.read_text()
    assert server.log.read_text().splitlines()[-1] == "imported: []"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model_path=model.ckpt"], "model_path 'model.ckpt' is not a .onnx file; the server"),
        (["model_path=missing.onnx"], "model 'missing.onnx' does not exist; run the export"),
        (["model_path=''"], "model_path is not set; pass model_path=path/to/model.onnx"),
        (
            ["model_path=m.onnx", "port=0", "max_body_bytes=0", "threads=0"],
            "port=0 must be in 1..65535; max_body_bytes=0 must be >= 1; threads=0 must be >= 1",
        ),
    ],
)
def test_bad_settings_stop_before_serving(
    overrides: list[str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        serve.serve(compose_config(tmp_path, overrides, config_name="serve"))


def test_a_port_in_use_is_one_line(exported: dict[str, Any], tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        overrides = [f"model_path={exported['model']}", f"port={port}"]
        with pytest.raises(UserError, match=rf"cannot listen on 127.0.0.1:{port} \(Address"):
            serve.serve(compose_config(tmp_path, overrides, config_name="serve"))


@pytest.mark.slow
def test_arrays_and_images_answer_as_predict_answers(
    server: Server, exported: dict[str, Any], digits: dict[str, Any], tmp_path: Path
) -> None:
    status, answer = server.request(
        "POST", "/predict", json.dumps(digits["raw"].tolist()).encode(), "application/json"
    )
    assert status == 200
    same_answers(answer["predictions"], predicted(tmp_path, exported["model"], digits["npy"]))

    # One input alone, and the {"inputs": ...} form, are a batch of one.
    one = digits["raw"][0].tolist()
    for body in (one, {"inputs": [one]}):
        status, answer = server.request(
            "POST", "/predict", json.dumps(body).encode(), "application/json; charset=utf-8"
        )
        assert status == 200
        assert len(answer["predictions"]) == 1

    files = predicted(tmp_path, exported["model"], digits["pngs"], "invert=true")
    for png, expected in zip(digits["pngs"], files, strict=True):
        status, answer = server.request(
            "POST", "/predict?invert=true", png.read_bytes(), "image/png"
        )
        assert status == 200, answer
        same_answers(answer["predictions"], [expected])


def huge_png() -> bytes:
    """A 5000 x 5000 black PNG: about 25 kB of file, 25 million pixels."""
    buffer = io.BytesIO()
    Image.new("L", (5000, 5000)).save(buffer, format="PNG")
    return buffer.getvalue()


def chunks(size: int, piece: int = 16_384) -> Iterator[bytes]:
    """A JSON-looking body of ``size`` bytes, sent chunked (no Content-Length)."""
    yield b"[" + b" " * (piece - 1)
    for _ in range(size // piece):
        yield b" " * piece


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (b"[[1, 2,", "application/json", 400, "the JSON body is not valid JSON (Expecting value"),
        (b"[" * 100_000, "application/json", 400, "the JSON body is not valid JSON"),
        (b'{"x": 1}', "application/json", 400, "an object with keys ['x']; send an array"),
        (b'[["a"]]', "application/json", 400, "not an array of numbers of shape (N, 1, 8, 8)"),
        (b"[[1], [1, 2]]", "application/json", 400, "not an array of numbers"),
        (b"[]", "application/json", 400, "input 'JSON body' is empty"),
        (json.dumps([[[[float("nan")] * 8] * 8]]).encode(), "application/json", 400, "NaN"),
        (b"\xff\xfe", "application/json", 400, "the JSON body is not valid JSON"),
        (b"", "application/json", 400, "the request body is empty"),
        (b"not a picture", "image/png", 400, "'image body' is not a readable image"),
        (b"a,b\n1,2\n", "text/csv", 400, "input 'CSV body' is a table, but the model was not"),
        (b"[[1]]", "text/plain", 415, "Content-Type 'text/plain' is not accepted"),
        (b"[[1]]", None, 415, "Content-Type '(none)' is not accepted"),
        (b"[" + b" " * LIMIT + b"]", "application/json", 413, f"over the server's {LIMIT}-byte"),
        ("chunked", "application/json", 413, f"over the server's {LIMIT}-byte limit"),
        ("huge png", "image/png", 413, "has 25000000 pixels, over the limit of 16777216"),
    ],
)
def test_bad_requests_get_a_4xx_and_one_line(
    server: Server, body: Any, content_type: str | None, status: int, message: str
) -> None:
    if body == "chunked":
        body = chunks(2 * LIMIT)  # http.client sends an iterable chunked
    elif body == "huge png":
        body = huge_png()
    got, answer = server.request("POST", "/predict", body, content_type)
    assert (got, list(answer)) == (status, ["error"]), answer
    assert message in answer["error"]
    assert "\n" not in answer["error"]


@pytest.mark.slow
def test_wrong_routes_methods_and_options_are_4xx(server: Server, digits: dict[str, Any]) -> None:
    body = json.dumps(digits["raw"][:1].tolist()).encode()
    assert server.request("GET", "/nothing") == (404, {"error": "GET /nothing: Not Found"})
    assert server.request("GET", "/predict")[0] == 405
    status, answer = server.request("POST", "/predict?invert=maybe", body, "application/json")
    assert status == 400
    assert answer["error"].startswith("query.invert: Input should be a valid boolean")
    # After all the bad requests above, the server is up and logged no traceback.
    assert server.request("GET", "/health") == (200, {"status": "ok"})
    assert "Traceback" not in server.log.read_text()


@pytest.mark.slow
def test_a_table_model_takes_csv_rows(tmp_path: Path) -> None:
    settings = module("data").CsvDataModule.make_fixture(tmp_path)
    overrides = ["data=csv", "model=mlp", "trainer.max_epochs=2", "callbacks.progress_bar=null"]
    overrides += ["logger=csv", *(f"data.{key}={value}" for key, value in settings.items())]
    metrics = module("train").train(compose_config(tmp_path / "run", overrides))
    table = Path(settings["path"])  # a, b, c and the label column, which is ignored
    # The table is outside the project: export reads it only when it is named again.
    export = [f"ckpt_path={metrics['best_checkpoint']}", "repeats=1", f"+data.path={table}"]
    module("export").export(compose_config(tmp_path / "export", export, config_name="export"))
    model = tmp_path / "export" / "model.onnx"

    port = free_port()
    with running(serve_command(model, port), tmp_path / "serve", port) as server:
        status, card = server.request("GET", "/metadata")
        encoded = ["a", "a_missing", "b", "b_missing", "c", "d=blue", "d=green", "d=red"]
        assert (card["feature_names"], card["class_names"]) == (encoded, ["x", "y", "z"])
        assert [column["name"] for column in card["table_columns"]] == ["a", "b", "c", "d"]
        status, answer = server.request("POST", "/predict", table.read_bytes(), "text/csv")
        assert status == 200
        same_answers(answer["predictions"], predicted(tmp_path / "p", model, table))
        assert len(answer["predictions"]) == 120
        # Raw rows as they come: gaps in number and category columns, an unseen category.
        raw = b"d,c,b,a\n,0.5,NA,\npurple,1.0,-1,2\n"
        status, answer = server.request("POST", "/predict", raw, "text/csv")
        assert status == 200
        assert len(answer["predictions"]) == 2
        assert answer["checks"]["unseen_categories"] == {"count": 1, "rows": [1]}  # purple
        # 30 rows, column a a thousand times its scale: flagged, bounded to 10 row indices
        scaled = "a,b,c,d\n" + "".join(f"{1000 * (i + 5)},0.1,0.2,red\n" for i in range(30))
        status, far = server.request("POST", "/predict", scaled.encode(), "text/csv")
        assert status == 200
        assert far["checks"]["outside_training_range"] == {"count": 30, "rows": list(range(10))}
        assert far["checks"]["unseen_categories"] == {"count": 0, "rows": []}
        records = [{"a": None, "b": None, "c": 0.5}, {"a": 2, "b": -1, "c": 1.0, "d": "purple"}]
        status, same = server.request(
            "POST", "/predict", json.dumps(records).encode(), "application/json"
        )
        assert status == 200
        assert same["predictions"] == answer["predictions"]  # JSON rows read as CSV rows

        status, answer = server.request("POST", "/predict", b"a,b\n1,2\n", "text/csv")
        assert status == 400
        assert answer["error"].startswith("input 'CSV body' lacks the column(s) c, d")
        status, answer = server.request("POST", "/predict", b"a,b,c,d\n1,x,2,red\n", "text/csv")
        assert (status, answer["error"]) == (
            400,
            (
                "CSV body column 'b' row 1 holds 'x', not a number; the model was trained on "
                "numbers there (leave the cell empty for a gap)"
            ),
        )
        encoded_row = [[1, 0, 2, 0, 3, 0, 1, 0]]  # the model's own input: encoded features
        status, answer = server.request(
            "POST", "/predict", json.dumps(encoded_row).encode(), "application/json"
        )
        assert status == 200
        assert len(answer["predictions"]) == 1


@pytest.mark.slow
def test_load_500_requests_from_8_threads_without_an_error(
    server: Server, digits: dict[str, Any]
) -> None:
    """Each thread keeps one connection; every request is one digit. Prints the figures
    the README quotes."""
    requests, threads = 500, 8
    bodies = [json.dumps(digits["raw"][i % 40 : i % 40 + 1].tolist()).encode() for i in range(40)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def worker() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            while True:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                start = time.perf_counter()
                connection.request(
                    "POST", "/predict", bodies[index % 40], {"Content-Type": "application/json"}
                )
                response = connection.getresponse()
                answer = json.loads(response.read())
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)
                    if response.status != 200 or len(answer["predictions"]) != 1:
                        errors.append(f"{response.status}: {answer}")
        except Exception as error:
            with lock:
                errors.append(repr(error))
        finally:
            connection.close()

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - started

    assert errors == []
    assert len(latencies) == requests
    p50, p95 = np.percentile(latencies, [50, 95]) * 1000
    print(
        f"\nload: {requests} requests from {threads} threads in {wall:.2f} s: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, {requests / wall:.0f} requests/s"
    )
    assert p95 < 1000  # a loaded 2-core machine still answers in well under a second


@pytest.mark.slow
def test_clients_that_send_half_a_body_and_leave_cost_one_line_each(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    """64 clients announce 4,000 bytes, send 100 and close: no traceback in the log."""
    port = free_port()
    with running(serve_command(exported["model"], port), tmp_path / "serve", port) as up:
        for _ in range(64):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                client.sendall(
                    b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n" + b"[" * 100
                )
                time.sleep(0.05)  # the server is reading the body when the client leaves
        time.sleep(2)  # let the server notice every disconnect
        assert up.request("GET", "/health") == (200, {"status": "ok"})  # still serving
        log = up.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert log.count("disconnected before sending its whole body") <= 64


@pytest.mark.slow
def test_head_answers_as_get_without_a_body(server: Server) -> None:
    for path in ("/health", "/metadata"):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            connection.request("HEAD", path)
            response = connection.getresponse()
            assert (response.status, response.read()) == (200, b""), path
            assert response.getheader("content-type") == "application/json"
            assert int(response.getheader("content-length") or 0) > 0  # GET's length
        finally:
            connection.close()


@pytest.mark.slow
def test_a_body_framed_two_ways_is_refused_and_what_follows_is_not_answered(
    server: Server, digits: dict[str, Any]
) -> None:
    body = json.dumps(digits["raw"][:1].tolist()).encode()
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    smuggled = b"GET /metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    request = (
        b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(chunked)}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        + chunked
        + smuggled
    )
    answer = exchange(server.port, request)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # the request after it got no answer
    assert b'{"error":"the request has both Content-Length and Transfer-Encoding' in answer
    assert "refused: the request has both Content-Length" in server.log.read_text()


@pytest.mark.slow
def test_a_host_that_is_not_a_name_of_the_server_is_refused(server: Server) -> None:
    """A loopback server answers its loopback names only (DNS rebinding gets a 400)."""
    status, answer = server.request("GET", "/health", headers={"Host": "rebound.example:8000"})
    assert status == 400
    assert answer["error"] == (
        "Host 'rebound.example' is not a name of this server (127.0.0.1, ::1, localhost); "
        "serve with host=<the name clients use>, or host=0.0.0.0 for any name"
    )
    for name in ("localhost", f"127.0.0.1:{server.port}", f"[::1]:{server.port}", "LOCALHOST"):
        assert server.request("GET", "/health", headers={"Host": name}) == (
            200, {"status": "ok"},
        ), name  # fmt: skip
    answer = exchange(server.port, b"GET /health HTTP/1.0\r\n\r\n")  # no Host at all
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]


def test_the_names_a_server_answers_follow_its_host_setting() -> None:
    guard = module("commands._serving_guard")
    loopback = {"localhost", "127.0.0.1", "::1"}
    assert guard.allowed_hosts("127.0.0.1") == loopback
    assert guard.allowed_hosts("localhost") == loopback
    assert guard.allowed_hosts("127.0.0.2") == {*loopback, "127.0.0.2"}
    assert guard.allowed_hosts("0.0.0.0") is None  # every interface: any name
    assert guard.allowed_hosts("::") is None
    assert guard.allowed_hosts("192.168.1.5") == {"192.168.1.5"}
    assert guard.allowed_hosts("Box.LAN") == {"box.lan"}
    assert [guard.host_name(h) for h in ("a.b:80", "[::1]:8000", "::1", "x")] == [
        "a.b", "::1", "::1", "x",
    ]  # fmt: skip
