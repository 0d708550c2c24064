"""A WSGI app served on a loopback port from a thread: real HTTP for a test, without a process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["serve_in_thread"]


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
