"""The power-cycle step: it cycles the VM exactly when a passthrough setting is pending."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from typing import Any

from components.gpu_failure_domain.power_cycle import power_cycle_script
from components.gpu_failure_domain.power_cycle_script import pending_passthrough


def test_a_pending_hostpci_or_machine_change_needs_a_power_cycle():
    pending: list[dict[str, Any]] = [
        {"key": "hostpci0", "value": "mapping=gpu-dc1,pcie=1", "pending": "mapping=gpu-dc1,pcie=1,rombar=1"},
        {"key": "machine", "value": "pc", "pending": "q35"},
        {"key": "cores", "value": 8},
    ]
    assert pending_passthrough(pending) == ["hostpci0", "machine"]


def test_a_removed_hostpci_device_needs_a_power_cycle():
    assert pending_passthrough([{"key": "hostpci0", "value": "mapping=gpu-dc1", "delete": 1}]) == ["hostpci0"]


def test_settings_already_in_effect_or_other_keys_need_no_power_cycle():
    pending: list[dict[str, Any]] = [
        {"key": "hostpci0", "value": "mapping=gpu-dc1,pcie=1"},
        {"key": "machine", "value": "q35"},
        {"key": "memory", "value": 16384, "pending": 32768},
    ]
    assert pending_passthrough(pending) == []


def test_the_step_stops_the_vm_before_starting_it_never_a_guest_reboot():
    script = power_cycle_script()
    assert script.index("/status/shutdown") < script.index("/status/start")
    assert "/status/reboot" not in script
    compile(script, "proxmox_power_cycle.py", "exec")


class FakeProxmox:
    """A loopback stand-in for the Proxmox API: records calls, answers pending config and VM status."""

    def __init__(self, pending: list[dict[str, Any]]) -> None:
        self.pending = pending
        self.status = "running"
        self.calls: list[tuple[str, str, str]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, data: Any) -> None:
                body = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.calls.append(("GET", self.path, self.headers.get("Authorization", "")))
                if self.path.endswith("/pending"):
                    self._answer(fake.pending)
                else:
                    self._answer({"status": fake.status})

            def do_POST(self) -> None:
                fake.calls.append(("POST", self.path, self.headers.get("Authorization", "")))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.status = "stopped" if self.path.endswith("/shutdown") else "running"
                self._answer("UPID:pve-dc1:0001")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeProxmox:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def run_step(self) -> subprocess.CompletedProcess[str]:
        """The step exactly as pulumi-command runs it: `python3 -c <script>` with the environment."""
        env = {
            **os.environ,
            "PROXMOX_ENDPOINT": f"http://127.0.0.1:{self.server.server_address[1]}/",
            "PROXMOX_NODE": "pve-dc1",
            "PROXMOX_VMID": "4101",
            "PROXMOX_API_TOKEN": "pulumi@pve!gpu-pool=abc",
            "PROXMOX_INSECURE": "false",
        }
        return subprocess.run(
            [sys.executable, "-c", power_cycle_script()], env=env, capture_output=True, text=True, timeout=60
        )


def test_the_step_shuts_the_vm_down_and_starts_it_when_hostpci_is_pending():
    with FakeProxmox([{"key": "hostpci0", "value": "x", "pending": "mapping=gpu-dc1,pcie=1"}]) as api:
        result = api.run_step()
    assert result.returncode == 0, result.stderr
    assert [(method, path) for method, path, _ in api.calls] == [
        ("GET", "/api2/json/nodes/pve-dc1/qemu/4101/pending"),
        ("POST", "/api2/json/nodes/pve-dc1/qemu/4101/status/shutdown"),
        ("GET", "/api2/json/nodes/pve-dc1/qemu/4101/status/current"),
        ("POST", "/api2/json/nodes/pve-dc1/qemu/4101/status/start"),
        ("GET", "/api2/json/nodes/pve-dc1/qemu/4101/status/current"),
    ]
    assert {auth for _, _, auth in api.calls} == {"PVEAPIToken=pulumi@pve!gpu-pool=abc"}
    assert "hostpci0 pending; full power cycle" in result.stdout


def test_the_step_leaves_the_vm_running_when_nothing_passthrough_is_pending():
    with FakeProxmox([{"key": "memory", "value": 16384, "pending": 32768}]) as api:
        result = api.run_step()
    assert result.returncode == 0, result.stderr
    assert [(method, path) for method, path, _ in api.calls] == [("GET", "/api2/json/nodes/pve-dc1/qemu/4101/pending")]
