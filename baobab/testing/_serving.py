"""A WSGI app served on a loopback port from a thread: real HTTP for a test, without a process."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

__all__ = ["post_raw", "serve_in_thread"]


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` (werkzeug's threaded server) on 127.0.0.1 until the block ends; yields its URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def post_raw(url: str, headers: dict[str, str], chunks: Iterable[bytes] = ()) -> tuple[int, dict[str, Any]]:
    """``POST`` to ``url`` written by hand on a socket, for what a client library will not send: headers that
    lie about the body (a ``Content-Length`` with no body after it), a chunked body that never ends. Returns the
    status and the JSON answer."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": parts.netloc, **headers}.items())
        sock.sendall(f"POST {parts.path or '/'} HTTP/1.1\r\n{head}\r\n".encode())
        for chunk in chunks:
            sock.sendall(chunk)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())
