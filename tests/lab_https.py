"""A lab's https file server, as a test plays one: a folder served over TLS with a certificate of the test's lab CA,
optionally asking for a client certificate (a registry that wants one), every request logged. Loopback only.

In a thread of the test (`serving`), or as its own process inside the first-boot test's network namespace, where it
listens on the address /etc/hosts gives the lab's name, port 443 (`python -m tests.lab_https ...`)."""

from __future__ import annotations

import argparse
import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _handler(folder: Path, log: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            with log.open("a") as out:
                out.write(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

    return Handler


def server(
    address: tuple[str, int], folder: Path, certificate: Path, key: Path, log: Path, client_ca: Path | None = None
) -> http.server.ThreadingHTTPServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    httpd = http.server.ThreadingHTTPServer(address, _handler(folder, log))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    return httpd


@contextmanager
def serving(folder: Path, certificate: Path, key: Path, log: Path, client_ca: Path | None = None) -> Iterator[int]:
    """Serves on 127.0.0.1 at a free port until the block ends; yields the port."""
    httpd = server(("127.0.0.1", 0), folder, certificate, key, log, client_ca)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, default=443)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--ready", type=Path, required=True)
    args = parser.parse_args()
    httpd = server((args.address, args.port), args.folder, args.cert, args.key, args.log)
    args.ready.write_text("ready\n")
    httpd.serve_forever()


if __name__ == "__main__":
    main()
