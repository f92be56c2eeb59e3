"""A test's loopback HTTP server, served from a thread and stopped (promptly) when the test is done."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# serve_forever looks for shutdown() between two waits on its socket; at its default of 0.5 s every server a test
# stopped cost it about half a second of nothing (a power-cycle test: 0.63 s, 0.17 s of it the step itself).
SHUTDOWN_POLL_SECONDS = 0.01


class Serving:
    """`server` answering from a daemon thread until stop()."""

    def __init__(self, server: socketserver.BaseServer, name: str | None = None) -> None:
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS}, name=name, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@contextmanager
def serving(server: socketserver.BaseServer, name: str | None = None) -> Iterator[None]:
    """The server answers inside the block and is stopped and closed when it ends."""
    running = Serving(server, name)
    try:
        yield
    finally:
        running.stop()


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and keeps quiet (the test says what matters)."""

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LoopbackServer:
    """An HTTP server on a free loopback port (`url`), answering while its `with` block runs."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self.serving = Serving(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.serving.stop()
