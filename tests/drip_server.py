"""A server that answers 200 at once and then sends its body a byte or two every 0.2 s:
each read comes in time, and the download never ends in any useful time."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def dripping_server(seconds: float = 10.0, headers: bool = False) -> Iterator[str]:
    """The URL of a CSV body (``a`` then a row of ``1`` every 0.2 s) served to one
    request on 127.0.0.1, for ``seconds`` at most; with ``headers``, it is a header that
    never ends that drips, before any body."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while True:
            try:
                connection, _ = listener.accept()
                break
            except TimeoutError:
                if stop.is_set():
                    return  # no request came
        connection.settimeout(None)
        with connection:
            connection.recv(65536)
            start = b"X-Slow: " if headers else b"Connection: close\r\n\r\na\n"
            connection.sendall(b"HTTP/1.1 200 OK\r\n" + start)
            for _ in range(int(seconds / 0.2)):
                if stop.wait(0.2):
                    return
                with contextlib.suppress(OSError):
                    connection.sendall(b"1\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/drip.csv"
    finally:
        stop.set()
        thread.join()
        listener.close()
