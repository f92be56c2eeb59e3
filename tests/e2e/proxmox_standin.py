"""A loopback HTTPS stand-in of the Proxmox VE API (answers from proxmox_api), and a real sshd for snippets.

The bpg provider uploads `snippets` over SSH (`proxmoxtf/resource/file.go` fileCreate -> `ssh.NodeStreamUpload`:
`/bin/bash -c '... try_sudo /usr/bin/tee <path>'`), since the PVE API has no upload for that content type. So the
stand-in is two real servers: this API and an OpenSSH sshd on loopback with a throwaway host key, trusting one
throwaway user key that an ssh-agent holds (the stack's `proxmox.ssh.agent: true`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.e2e.proxmox_api import ApiError, PciFunction, ProxmoxState
from tests.e2e.proxmox_permissions import filtered, refusal
from tests.e2e.servers import _openssl, free_ports, stop
from tests.environ import process_environment
from tests.loopback import serving

SSHD = Path("/usr/sbin/sshd")
API_PREFIX = "/api2/json"


@dataclass(frozen=True)
class ProxmoxStandIn:
    endpoint: str
    token: str
    state: ProxmoxState
    ssh_port: int
    ssh_agent_socket: str
    # The only user the sshd lets in: whoever runs the tests (root in CI).
    ssh_user: str

    def requests(self, method: str | None = None, path_contains: str = "") -> list[tuple[str, str]]:
        return [
            (r.method, r.path)
            for r in list(self.state.requests)
            if (method is None or r.method == method) and path_contains in r.path
        ]

    def unanswered(self) -> list[str]:
        """Calls the stand-in does not implement: each one is a gap in what this tier proves."""
        return [f"{r.method} {r.path}" for r in list(self.state.requests) if r.status == 501]


def _handler(state: ProxmoxState, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any], reason: str | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status, reason)
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            form = parse_qs(url.query, keep_blank_values=True)
            for key, values in parse_qs(body, keep_blank_values=True).items():
                form.setdefault(key, []).extend(values)
            authorization = self.headers.get("Authorization") or ""
            # A limited token (the unattended repair's): held to knowledge/proxmox_access.py's table.
            acl = state.token_acls.get(authorization.removeprefix("PVEAPIToken="))
            if authorization != f"PVEAPIToken={token}" and acl is None:
                # PVE's answer to a wrong or missing token (pve-manager PVE/HTTPServer.pm auth_handler).
                self._answer(401, {"data": None}, "authentication failure")
                return
            if not url.path.startswith(API_PREFIX):
                self._answer(404, {"data": None}, "Not Found")
                return
            path = url.path.removeprefix(API_PREFIX)
            sent = f"{path}?{url.query}" if url.query else path
            if acl is not None:
                refused = refusal(self.command, sent, acl)
                if refused is not None:
                    state.refused.append(f"{self.command} {sent}: {refused}")
                    self._answer(403, {"data": None, "message": refused}, refused)
                    return
                if sent == "/access/permissions":
                    self._answer(200, {"data": {k: dict(v) for k, v in acl.items()}})
                    return
            try:
                data = state.handle(self.command, path, form)
            except ApiError as error:
                # PVE puts the message in the status line; the provider reports it from there.
                self._answer(error.status, {"data": None, "message": error.message}, error.message)
                return
            self._answer(200, {"data": data if acl is None else filtered(self.command, sent, data, acl)})

        do_GET = do_POST = do_PUT = do_DELETE = _serve

    return Handler


def write_tls(work: Path) -> ssl.SSLContext:
    """A self-signed serving cert for 127.0.0.1, like a fresh PVE node's (the stack sets `insecure: true`)."""
    _openssl(
        work,
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=pve-standin "
        "-addext subjectAltName=IP:127.0.0.1 -keyout pve.key -out pve.crt",
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(work / "pve.crt"), str(work / "pve.key"))
    return context


def sshd_config(work: Path, port: int, user: str) -> Path:
    config = work / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {work / 'ssh_host_ed25519_key'}",
                f"AuthorizedKeysFile {work / 'authorized_keys'}",
                f"PidFile {work / 'sshd.pid'}",
                f"AllowUsers {user}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                # The temp dir is not root-owned all the way up: StrictModes would refuse the key file.
                "StrictModes no",
                "UsePAM no",
                "Subsystem sftp internal-sftp",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    return config


@contextlib.contextmanager
def running_sshd(work: Path) -> Iterator[tuple[int, str]]:
    """sshd on a free loopback port and an ssh-agent holding the only key it trusts: (port, agent socket)."""
    if not SSHD.is_file():
        raise FileNotFoundError(f"{SSHD} is missing: install Debian's openssh-server (.ci/run does)")
    user = pwd.getpwuid(os.getuid()).pw_name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "ssh_host_ed25519_key")], check=True
    )
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "user_key")], check=True)
    shutil.copy(work / "user_key.pub", work / "authorized_keys")
    (port,) = free_ports(1)
    # sshd insists on an absolute path and on its privilege-separation directory.
    Path("/run/sshd").mkdir(exist_ok=True)
    log = work / "sshd.log"
    sshd = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(sshd_config(work, port, user))],
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    socket_path = str(work / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", socket_path], stdout=subprocess.DEVNULL)
    try:
        _wait_for(lambda: Path(socket_path).exists() and sshd.poll() is None and _listening(port), "sshd and agent")
        subprocess.run(
            ["ssh-add", "-q", str(work / "user_key")],
            env={**process_environment(), "SSH_AUTH_SOCK": socket_path},
            check=True,
            capture_output=True,
        )
        yield port, socket_path
    finally:
        stop([sshd])
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=15)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(ready: Any, what: str, seconds: float = 20) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {seconds} s")
        time.sleep(0.05)  # poll interval; bounded by the deadline above


@contextlib.contextmanager
def serving_api(work: Path, state: ProxmoxState, token: str) -> Iterator[str]:
    """The API alone (no sshd) on a free loopback port, for tests of what reads and drives VMs: its endpoint."""
    context = write_tls(work)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, token))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving(server, name="proxmox-api"):
        yield f"https://127.0.0.1:{server.server_address[1]}/"


@contextlib.contextmanager
def start_proxmox(work: Path, nodes: dict[str, list[PciFunction]], token: str) -> Iterator[ProxmoxStandIn]:
    """The API on a free loopback port and the sshd; both stop when the block ends."""
    storage = work / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    state = ProxmoxState(nodes, storage)
    context = write_tls(work)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, token))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving(server, name="proxmox-standin"), running_sshd(work) as (ssh_port, agent):
        endpoint = f"https://127.0.0.1:{server.server_address[1]}/"
        yield ProxmoxStandIn(endpoint, token, state, ssh_port, agent, pwd.getpwuid(os.getuid()).pw_name)
