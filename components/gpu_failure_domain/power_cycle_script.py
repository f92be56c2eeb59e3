"""Power-cycle a Proxmox VM when passthrough settings are pending. Runs as a pulumi-command step.

machine=q35 and hostpci0 only take effect after a full power cycle of the VM, not a guest reboot
(article). The provider applies them as pending changes and at most warns, so this step reads
the VM's pending config and, only if a passthrough key is pending, shuts the VM down (forcing
after a timeout) and starts it again. Standard library only: it runs on the operator's machine.

Environment: PROXMOX_ENDPOINT, PROXMOX_NODE, PROXMOX_VMID, and PROXMOX_API_TOKEN
(user@realm!id=uuid) or PROXMOX_ROOT_PASSWORD; PROXMOX_INSECURE=true skips TLS verification.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

PASSTHROUGH_KEYS = ("machine", "bios")
PASSTHROUGH_PREFIXES = ("hostpci",)


def is_passthrough_key(key: str) -> bool:
    return key in PASSTHROUGH_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def pending_passthrough(pending: list[dict[str, Any]]) -> list[str]:
    """Keys of `GET /nodes/{node}/qemu/{vmid}/pending` entries that wait for a power cycle."""
    return sorted(
        entry["key"]
        for entry in pending
        if is_passthrough_key(str(entry.get("key", ""))) and ("pending" in entry or entry.get("delete"))
    )


class Api:
    def __init__(self, endpoint: str, insecure: bool) -> None:
        self.base = endpoint.rstrip("/") + "/api2/json"
        self.context = ssl._create_unverified_context() if insecure else ssl.create_default_context()
        self.headers: dict[str, str] = {}

    def login(self, token: str | None, password: str | None) -> None:
        if token:
            self.headers["Authorization"] = f"PVEAPIToken={token}"
            return
        data = self.call("POST", "/access/ticket", {"username": "root@pam", "password": password or ""})
        self.headers["Cookie"] = f"PVEAuthCookie={data['ticket']}"
        self.headers["CSRFPreventionToken"] = data["CSRFPreventionToken"]

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=self.headers)
        with urllib.request.urlopen(request, context=self.context, timeout=60) as response:
            return json.load(response)["data"]


def wait_for(api: Api, vm: str, status: str, seconds: int) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if api.call("GET", f"{vm}/status/current")["status"] == status:
            return True
        time.sleep(3)
    return False


def main() -> int:
    env = os.environ
    api = Api(env["PROXMOX_ENDPOINT"], env.get("PROXMOX_INSECURE") == "true")
    api.login(env.get("PROXMOX_API_TOKEN"), env.get("PROXMOX_ROOT_PASSWORD"))
    vm = f"/nodes/{env['PROXMOX_NODE']}/qemu/{env['PROXMOX_VMID']}"
    keys = pending_passthrough(api.call("GET", f"{vm}/pending"))
    if not keys:
        print(f"VM {env['PROXMOX_VMID']}: no passthrough change pending, no power cycle needed")
        return 0
    print(f"VM {env['PROXMOX_VMID']}: {', '.join(keys)} pending; full power cycle (stop, then start)")
    api.call("POST", f"{vm}/status/shutdown", {"timeout": "180", "forceStop": "1"})
    if not wait_for(api, vm, "stopped", 240):
        print(f"VM {env['PROXMOX_VMID']} did not stop within 240 s", file=sys.stderr)
        return 1
    api.call("POST", f"{vm}/status/start")
    if not wait_for(api, vm, "running", 180):
        print(f"VM {env['PROXMOX_VMID']} did not start within 180 s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
