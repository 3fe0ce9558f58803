"""One deadline for a whole HTTP exchange: connecting, the headers and the body.

urllib's ``timeout`` bounds each socket operation, not the exchange: a server that sends
its status line or its body a byte every few seconds answers every read in time, and
held a run for ever, headers and all. So every connection a fetch opens (redirects
included) is registered here, and when the deadline passes a timer shuts them down: the
read blocked in urllib or http.client returns at once, and ``expired`` tells the caller
why (a connection that ends without a length reads as a complete body otherwise).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.request
from types import TracebackType
from typing import Any


class Deadline:
    """Shuts down every connection registered with ``watch`` ``seconds`` after entry."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib handlers whose connections this deadline watches (in place of the
        default HTTP and HTTPS handlers, which ``build_opener`` then leaves out)."""
        return [_HttpHandler(self), _HttpsHandler(self)]

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed already
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], deadline: Deadline) -> Any:
    """``base`` registering its socket with ``deadline`` once connected."""

    class Watched(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    return Watched


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._connection = _watched(http.client.HTTPConnection, deadline)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._connection = _watched(http.client.HTTPSConnection, deadline)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._context)  # type: ignore[attr-defined]
