"""`GET /metrics` for gpu-pool's programs in the cluster (the unattended repair's watcher, the notebook reclaim
policy): the Prometheus text a callable says at each request, in a thread of its own. Standard library only."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any


def serve_metrics(text: Callable[[], str], port: int, host: str = "") -> http.server.ThreadingHTTPServer:
    """Serve what `text()` says on `port` (0: a free one); returns the server (`server_address`, `shutdown()`)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text().encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
