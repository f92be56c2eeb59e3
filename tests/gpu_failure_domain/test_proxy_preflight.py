"""With `preflight.hostCheck` and a proxy, each Proxmox host tries an HTTPS CONNECT through the proxy to the RKE2
installer's hosts; a refusal is a warning naming the host and what the proxy answered. The commands are run as
written: `ssh` is a shim that runs the remote command here, curl is real, the proxy is a loopback one."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from components.gpu_failure_domain.host_preflight import run_proxy_preflight
from config.proxy import ProxyConfig, installer_hosts
from config.rke2 import Rke2Config

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl runs the check on the Proxmox host")


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A proxy that lets CONNECT through to get.rke2.io only (200, then closes) and forbids every other host."""
    listener = socket.create_server(("127.0.0.1", 0))
    # A closed listening socket does not wake a thread blocked in accept(): it polls a stop flag instead.
    listener.settimeout(0.1)
    stop = threading.Event()
    asked: list[str] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with conn:
                request = conn.recv(4096).decode(errors="replace")
                line = request.split("\r\n", 1)[0]
                asked.append(line)
                allowed = line.startswith("CONNECT get.rke2.io:443 ")
                conn.sendall(
                    b"HTTP/1.1 200 Connection established\r\n\r\n" if allowed else b"HTTP/1.1 403 Forbidden\r\n\r\n"
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", asked
    stop.set()
    thread.join()
    listener.close()


def _runner(tmp_path: Path) -> Callable[[str], str]:
    shim = tmp_path / "bin" / "ssh"
    shim.parent.mkdir()
    # The last argument is the remote command, as ssh runs it through the remote user's shell.
    shim.write_text('#!/bin/sh\nfor last; do :; done\nexec sh -c "$last"\n')
    shim.chmod(0o755)

    def run(script: str) -> str:
        env = {"PATH": f"{shim.parent}:/usr/bin:/bin"}
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env).stdout

    return run


def test_a_proxy_that_refuses_the_installers_host_is_a_warning_naming_host_and_answer(
    tmp_path: Path, proxy: tuple[str, list[str]]
) -> None:
    url, asked = proxy
    hosts = [("get.rke2.io", 443), ("github.com", 443)]

    warnings = run_proxy_preflight(
        ["pve1", "pve2"], proxy=url, hosts=hosts, ssh_user="root", node_addresses={}, run=_runner(tmp_path)
    )

    assert [w.split(":", 1)[0] for w in warnings] == ["Proxmox node pve1", "Proxmox node pve2"]
    assert (
        f"an HTTPS CONNECT through {url} to github.com:443 failed (the proxy answered CONNECT with 403" in warnings[0]
    )
    assert asked.count("CONNECT get.rke2.io:443 HTTP/1.1") == 2


def test_a_proxy_nobody_answers_is_a_warning_that_says_so(tmp_path: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()

    [warning] = run_proxy_preflight(
        ["pve1"],
        proxy=f"http://127.0.0.1:{port}",
        hosts=[("get.rke2.io", 443)],
        ssh_user="root",
        node_addresses={},
        run=_runner(tmp_path),
    )

    assert "(no answer from the proxy; curl: curl: (7)" in warning


def test_the_installer_hosts_are_the_mirrors_where_set_and_leave_out_what_no_proxy_reaches() -> None:
    rke2 = Rke2Config.model_validate({"serverUrl": "https://rke2.lab:9345", "version": "v1.33.5+rke2r1"})
    assert installer_hosts(ProxyConfig.model_validate({"https": "http://p:3128"}), rke2) == [
        ("get.rke2.io", 443),
        ("github.com", 443),
    ]
    mirrored = Rke2Config.model_validate(
        {
            "serverUrl": "https://rke2.lab:9345",
            "version": "v1.33.5+rke2r1",
            "installer": {
                "script": "https://files.lab.internal:8443/install.sh",
                "artifacts": "http://dl.example.org/rke2",
            },
        }
    )
    proxied = ProxyConfig.model_validate({"https": "http://p:3128", "noProxy": [".lab.internal"]})
    assert installer_hosts(proxied, mirrored) == [("dl.example.org", 80)]
