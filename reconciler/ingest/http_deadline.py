"""One deadline for a whole HTTP exchange: connecting, the headers and the body.

urllib's ``timeout`` bounds each socket operation, not the exchange: a server that sends
its status line or its body a byte every few seconds answers every read in time, and
held a run for ever, headers and all. So every connection a fetch opens (redirects
included) is registered here, and a watcher thread shuts them down when the deadline
passes or the run is asked to stop (``stop``, the first Ctrl-C or SIGTERM): the read
blocked in urllib or http.client returns at once, and ``expired`` or ``stopped`` tells
the caller why (a connection that ends without a length reads as a complete body
otherwise).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from types import TracebackType
from typing import Any

POLL_SECONDS = 0.2  # how soon a stop (or a container past its limits) is noticed


class Deadline:
    """Shuts down every connection registered with ``watch`` ``seconds`` after entry, or
    as soon as ``stop`` answers true."""

    def __init__(self, seconds: float, stop: Callable[[], bool] = lambda: False) -> None:
        self.seconds = seconds
        self.stop = stop
        self.expired = False
        self.stopped = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch_clock, daemon=True)

    def __enter__(self) -> Deadline:
        self._watcher.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._done.set()
        self._watcher.join()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired or self.stopped:
                _shut(sock)

    def raise_if_stopped(self) -> None:
        """``KeyboardInterrupt`` once the run was asked to stop: what a read that failed
        meanwhile means (as the second signal raises it)."""
        if self.stopped:
            raise KeyboardInterrupt

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib handlers whose connections this deadline watches (in place of the
        default HTTP and HTTPS handlers, which ``build_opener`` then leaves out)."""
        return [_HttpHandler(self), _HttpsHandler(self)]

    def _watch_clock(self) -> None:
        end = time.monotonic() + self.seconds
        while not self._done.wait(POLL_SECONDS):
            stopped, expired = self.stop(), time.monotonic() >= end
            if stopped or expired:
                with self._lock:
                    self.stopped, self.expired = stopped, expired and not stopped
                    for sock in self._sockets:
                        _shut(sock)
                return


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
