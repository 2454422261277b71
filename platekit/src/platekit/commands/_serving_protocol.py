"""uvicorn's HTTP/1.1 protocol (h11) with two things it lacks on a network.

- A deadline for each request's line and headers. uvicorn has none: its keep-alive timeout
  restarts on every byte, so clients sending a byte now and then hold their connections for
  as long as they like. A connection that has not sent a whole request head within
  ``request_timeout`` seconds of its first byte (or of opening) gets 408 and is closed. The
  body has the same deadline, kept by the app (``_serving_app.py``), which reads it.
- The JSON error body for a request it cannot parse, instead of uvicorn's plain text.

It relies on ``H11Protocol``'s ``conn``, ``transport``, ``loop`` and ``send_400_response``
(uvicorn 0.54); ``tests/test_private_uses.py`` checks them on the installed uvicorn.
"""

import asyncio
import json
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

PHRASES = {400: "Bad Request", 408: "Request Timeout"}


def protocol_with_deadline(request_timeout: float) -> type[H11Protocol]:
    """The protocol class uvicorn runs (``uvicorn.run(http=...)``) for this deadline."""
    return type("DeadlineProtocol", (DeadlineProtocol,), {"request_timeout": request_timeout})


class DeadlineProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's line and headers: a
    client that is slow to send them (or sends nothing) is closed, not waited for."""

    request_timeout = 10.0
    deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.arm()  # a client that connects and sends nothing is closed at the deadline too

    def data_received(self, data: bytes) -> None:
        if self.deadline is None and self.conn.their_state is h11.IDLE:
            self.arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self.disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        super().connection_lost(exc)

    def arm(self) -> None:
        self.deadline = self.loop.call_later(self.request_timeout, self.expired)

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def expired(self) -> None:
        self.deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        client = "{}:{}".format(*self.client) if self.client else "a client"
        log.info(
            "%s sent no whole request head in %g s (request_timeout): closed with 408",
            client,
            self.request_timeout,
        )
        self.answer(
            408,
            f"the request's line and headers did not arrive within {self.request_timeout:g} s "
            "(the server's request_timeout); send the whole request at once",
        )

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse (it has logged one line)."""
        self.answer(400, f"malformed HTTP request ({msg.rstrip('.')}); send HTTP/1.1")

    def answer(self, status: int, message: str) -> None:
        """A JSON error response written as bytes (h11's state is past use), then close."""
        body = json.dumps({"error": message}).encode()
        head = (
            f"HTTP/1.1 {status} {PHRASES[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()
