"""A loopback HTTPS server answering the Proxmox API paths `gpu-pool discover` reads, in the documented shapes:
`GET /api2/json/nodes/{node}/hardware/pci` and `GET /api2/json/cluster/mapping/pci`, each wrapped in the API's
`{"data": ...}`, behind `Authorization: PVEAPIToken=<user@realm!tokenid=uuid>` (401 otherwise, as pveproxy
answers a bad token). Its certificate is self-signed for 127.0.0.1, like a fresh Proxmox node's."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.loopback import serving

PREFIX = "/api2/json/"


@dataclass
class ProxmoxApi:
    url: str
    requests: list[str] = field(default_factory=list)


def self_signed_certificate(work: Path) -> tuple[Path, Path]:
    """An EC P-256 certificate for 127.0.0.1 (generated in milliseconds), as openssl writes it."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=pve-a", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", "pve.key", "-out", "pve.crt"],
        cwd=work, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return work / "pve.crt", work / "pve.key"


@contextmanager
def proxmox_api(
    work: Path, token: str, hardware: Mapping[str, Any], mappings: list[dict[str, Any]]
) -> Iterator[ProxmoxApi]:
    """Serve `hardware` (node -> its hardware/pci answer) and `mappings` until the block ends."""
    cert, key = self_signed_certificate(work)
    api = ProxmoxApi("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            api.requests.append(self.path)
            if self.headers.get("Authorization") != f"PVEAPIToken={token}":
                self._answer(401, None, "authentication failure")
                return
            path = self.path.removeprefix(PREFIX)
            parts = path.split("/")
            if path == "cluster/mapping/pci":
                self._answer(200, mappings)
            elif len(parts) == 4 and parts[0] == "nodes" and parts[2:] == ["hardware", "pci"] and parts[1] in hardware:
                self._answer(200, hardware[parts[1]])
            else:
                self._answer(404, None, "Not Found")

        def _answer(self, code: int, data: Any, reason: str | None = None) -> None:
            body = json.dumps({"data": data}).encode()
            self.send_response(code, reason)
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    api.url = f"https://127.0.0.1:{server.server_address[1]}/"
    with serving(server):
        yield api
