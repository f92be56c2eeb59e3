"""The one Proxmox client: the API with a token (or root's password, for a stack that logs in so), every refusal
one line with PVE's own message, and the reads a turn and `discover` make (a VM's status and pending changes, a
worker task's exit status, the cluster's guests, a host's PCI devices, the PCI mappings with a host's check).

    pve = Proxmox(endpoint, insecure, trusted_ca); pve.login(token, password)
    pve.call(method, path, form) -> the answer's `data`; ProxmoxFailed otherwise (`status`: HTTP, None: no answer)
    pve.guest(vmid), pve.guests(), pve.status(vm), pve.pending(vm), pve.wait_task(upid, s), pve.wait_status(vm, s, s)
    pve.hardware_pci(node), pve.pci_mappings(check_node)
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node.waiting import StepFailed


class ProxmoxFailed(StepFailed):
    """A Proxmox API call that failed, as one line with PVE's own message (never a traceback); `status` is the
    HTTP status (None: the API did not answer)."""

    def __init__(self, message: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        # PVE's own words for a refusal (its status line or the body's message).
        self.detail = detail


def pve_message(error: urllib.error.HTTPError) -> str:
    """PVE's reason for a refusal: pveproxy puts the handler's `die` message in the status line, and a parameter
    error's details in the body's `errors` (pve-http-server PVE/APIServer/AnyEvent.pm)."""
    reason = str(error.reason or "").strip()
    try:
        body = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    details = body.get("errors") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    text = str(message or reason or f"HTTP {error.code}")
    if isinstance(details, dict) and details:
        text += " (" + "; ".join(f"{k}: {v}" for k, v in details.items()) + ")"
    return " ".join(text.split())


def client_context(insecure: bool, trusted_ca: str | None) -> ssl.SSLContext:
    """TLS for the Proxmox API: the system store plus the lab CA when the stack names one; `insecure` (the
    provider's own switch for PVE's self-signed certificate) verifies nothing."""
    if insecure:
        return ssl._create_unverified_context()
    context = ssl.create_default_context()
    if trusted_ca:
        context.load_verify_locations(cadata=trusted_ca)
    return context


def proxmox_facts(endpoint: str, insecure: bool, trusted_ca: str | None) -> dict[str, Any]:
    """How a process reaches the API, as the watcher's facts hold it; `trustedCa` only where the stack has one (a
    stack without keeps its facts ConfigMap as it was)."""
    facts: dict[str, Any] = {"endpoint": endpoint, "insecure": insecure}
    if trusted_ca:
        facts["trustedCa"] = trusted_ca
    return facts


def task_ok(exitstatus: str | None) -> bool:
    """A worker task's exit status is a success: `OK` or `WARNINGS: n` (pve-manager PVE/API2/Tasks.pm)."""
    return exitstatus is not None and (exitstatus == "OK" or exitstatus.startswith("WARNINGS"))


def pending_keys(pending: list[dict[str, Any]]) -> list[str]:
    """Keys of `GET /nodes/{node}/qemu/{vmid}/pending` entries that wait for the VM's next cold start."""
    return sorted(str(e["key"]) for e in pending if "key" in e and ("pending" in e or e.get("delete")))


@dataclass
class Proxmox:
    endpoint: str
    insecure: bool = False
    # gpu-pool:trustedCa's PEM bundle, trusted besides the system store: the watcher's image does not carry a lab CA
    # that signed the Proxmox API's certificate (issue 49: the program's own payloads trust the lab CA).
    trusted_ca: str | None = None
    poll: float = field(default_factory=lambda: float(os.environ.get("GPU_POOL_POLL_SECONDS", "3")))
    sleep: Callable[[float], None] = time.sleep
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.endpoint.rstrip("/") + "/api2/json"

    def login(self, token: str | None, password: str | None) -> None:
        if token:
            self.headers["Authorization"] = f"PVEAPIToken={token}"
            return
        data = self.call("POST", "/access/ticket", {"username": "root@pam", "password": password or ""})
        self.headers["Cookie"] = f"PVEAuthCookie={data['ticket']}"
        self.headers["CSRFPreventionToken"] = data["CSRFPreventionToken"]

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        """The answer's `data`; a refusal or no answer is ProxmoxFailed with PVE's message (a Python traceback
        once ended a wave's power cycle and a repair: FIELD-REVIEW-5 WRONG-5)."""
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=self.headers)
        context = client_context(self.insecure, self.trusted_ca)
        try:
            with urllib.request.urlopen(request, context=context, timeout=60) as response:
                return json.load(response)["data"]
        except urllib.error.HTTPError as error:
            said = pve_message(error)
            raise ProxmoxFailed(f"Proxmox refused {method} {path}: {error.code} {said}", error.code, said) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            hint = (
                "; a certificate from a lab CA needs that CA in gpu-pool:trustedCa, a self-signed one "
                "gpu-pool:proxmox.insecure: true (as the provider does)"
                if isinstance(reason, ssl.SSLCertVerificationError)
                else ""
            )
            raise ProxmoxFailed(f"cannot reach the Proxmox API at {self.endpoint}: {reason}{hint}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise ProxmoxFailed(
                f"the Proxmox API at {self.endpoint} gave no answer to {method} {path}: {error}"
            ) from None

    # ------------------------------------------------------------------------------------------------ reads

    def status(self, vm: str) -> str:
        """`running`, `stopped`... of `/nodes/<node>/qemu/<vmid>`."""
        return str((self.call("GET", f"{vm}/status/current") or {}).get("status") or "")

    def pending(self, vm: str) -> list[str]:
        return pending_keys(self.call("GET", f"{vm}/pending") or [])

    def guests(self) -> list[dict[str, Any]]:
        """`GET /cluster/resources?type=vm`: every guest the credential may see, with its node, status, lock and
        HA state (pve-manager PVE/API2/Cluster.pm: filtered on VM.Audit, no 403)."""
        return [dict(g) for g in self.call("GET", "/cluster/resources?type=vm") or [] if isinstance(g, dict)]

    def guest(self, vmid: str) -> dict[str, Any] | None:
        return next((g for g in self.guests() if str(g.get("vmid")) == str(vmid)), None)

    def hardware_pci(self, node: str) -> Any:
        """`GET /nodes/<node>/hardware/pci`: the host's own PCI list. It checks Sys.Audit (or Sys.Modify) on `/`,
        not on `/nodes/<node>` (pve-manager PVE/API2/Hardware/PCI.pm pci_scan: FIELD-REVIEW-6 W-4)."""
        return self.call("GET", f"/nodes/{urllib.parse.quote(node)}/hardware/pci")

    def pci_mappings(self, check_node: str | None = None) -> Any:
        """`GET /cluster/mapping/pci` (Mapping.Audit per entry); with `check_node` each entry's `checks` say what
        that host finds wrong with the mapped device (pve-manager Cluster/Mapping/PCI.pm)."""
        query = f"?check-node={urllib.parse.quote(check_node)}" if check_node else ""
        return self.call("GET", f"/cluster/mapping/pci{query}")

    # ------------------------------------------------------------------------------------------------ waits

    def wait_status(self, vm: str, status: str, seconds: int) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.status(vm) == status:
                return True
            self.sleep(self.poll)
        return False

    def wait_task(self, upid: str, seconds: int) -> str | None:
        """The exit status of a worker task (`GET /nodes/{node}/tasks/{upid}/status`: `exitstatus` is `OK`,
        `WARNINGS: n`, or the task's error), None while it still runs at the deadline."""
        parts = upid.split(":")
        if len(parts) < 3 or parts[0] != "UPID":
            return "OK"  # not a task id: nothing to wait for
        deadline = time.monotonic() + seconds
        path = f"/nodes/{parts[1]}/tasks/{urllib.parse.quote(upid, safe='')}/status"
        while True:
            answer = self.call("GET", path) or {}
            if answer.get("status") == "stopped":
                return str(answer.get("exitstatus") or "OK")
            if time.monotonic() >= deadline:
                return None
            self.sleep(self.poll)

    def placed(self, vmid: str, seconds: int) -> str | None:
        """The node an HA-managed VM runs on once it runs, from the cluster's view (its `/nodes/<stack node>/...`
        path no longer resolves when the CRM started it elsewhere)."""
        deadline = time.monotonic() + seconds
        while True:
            entry = self.guest(vmid) or {}
            if entry.get("status") == "running":
                return str(entry.get("node") or "") or None
            if time.monotonic() >= deadline:
                return None
            self.sleep(self.poll)
