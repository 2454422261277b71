"""Requests refused before any route reads them, each with the JSON error body and one log line.

- A ``Host`` that is not a name of this server: a page on another site can make a browser on
  this machine send requests to a loopback server under the site's own name (DNS
  rebinding); a server bound to a loopback address answers only its loopback names.
- A body framed two ways (``Content-Length`` and ``Transfer-Encoding`` both): a proxy in
  front and this server could split the stream differently, and the rest of the body be
  answered as a second request (request smuggling). The connection is closed after the 400.
"""

import ipaddress
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def allowed_hosts(host: str) -> frozenset[str] | None:
    """The ``Host`` names a server bound to ``host`` answers; None: every name (it listens on
    every interface, ``0.0.0.0`` or ``::``, where clients may use any name of the machine)."""
    name = host.strip("[]").lower()
    try:
        address = ipaddress.ip_address(name)
    except ValueError:  # a name such as localhost or myhost.lan
        return LOOPBACK_NAMES if name == "localhost" else frozenset({name})
    if address.is_unspecified:
        return None
    if address.is_loopback:
        return LOOPBACK_NAMES | {name}
    return frozenset({name})


def host_name(header: str) -> str:
    """``example.org:8000`` -> ``example.org``; ``[::1]:8000`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class RequestGuard:
    """ASGI middleware refusing the requests above with 400 before the app sees them."""

    def __init__(self, app: App, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (problem := self.problem(scope)):
            log.info("%s %s refused: %s", scope["method"], scope["path"], problem)
            close = {"connection": "close"}  # nothing after it is read as another request
            await JSONResponse({"error": problem}, status_code=400, headers=close)(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)

    def problem(self, scope: Scope) -> str | None:
        """Why the request is refused before any handler runs (a body framed two ways, a
        Host that is not this server's), or ``None``."""
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.lower(), []).append(value)
        if b"transfer-encoding" in headers and b"content-length" in headers:
            return (
                "the request has both Content-Length and Transfer-Encoding; send one "
                "(its body is framed two ways)"
            )
        if self.allowed is None:
            return None
        hosts = headers.get(b"host", [])
        name = host_name(hosts[0].decode("latin-1")) if len(hosts) == 1 else ""
        if name not in self.allowed:
            what = repr(name) if name else "header missing or repeated:"
            return (
                f"Host {what} is not a name of this server ({', '.join(sorted(self.allowed))}); "
                "serve with host=<the name clients use>, or host=0.0.0.0 for any name"
            )
        return None
