"""The Proxmox stand-in's permission checks (tests/e2e/proxmox_permissions.py) read knowledge/proxmox_access.py's
table as upstream's checks behave: a perm endpoint needs its privileges on the row's path (its own entry, else an
ancestor's propagated one), a filter endpoint drops what the token may not see, and a call with no row is refused."""

from __future__ import annotations

import pytest

from tests.e2e.proxmox_permissions import filtered, refusal

ACL = {"/vms/4201": {"VM.PowerMgmt": 0, "VM.Audit": 0}, "/mapping/pci/gpu-dc2": {"Mapping.Audit": 0}}


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/nodes/pve-dc2/qemu/4201/status/shutdown", True),
        ("POST", "/nodes/pve-dc2/qemu/4201/status/start", True),
        ("GET", "/nodes/pve-dc2/qemu/4201/status/current", True),
        ("POST", "/nodes/pve-dc1/qemu/4101/status/shutdown", False),
        ("GET", "/nodes/pve-dc2/hardware/pci", False),
        ("POST", "/nodes/pve-dc2/qemu/4201/config", False),
        ("GET", "/access/permissions", True),
        ("GET", "/nodes/pve-dc2/tasks/UPID%3Apve-dc2%3A1/status", True),
    ],
)
def test_each_call_is_allowed_exactly_where_its_upstream_check_passes(method: str, path: str, allowed: bool) -> None:
    assert (refusal(method, path, ACL) is None) is allowed


def test_a_grant_reaches_below_its_path_only_where_it_propagates() -> None:
    path = "/nodes/pve-dc1/qemu/4101/status/shutdown"

    assert refusal("POST", path, {"/vms": {"VM.PowerMgmt": 0}}) is not None
    assert refusal("POST", path, {"/vms": {"VM.PowerMgmt": 1}}) is None


def test_a_listing_leaves_out_what_the_token_may_not_see() -> None:
    guests = [{"vmid": 4101}, {"vmid": 4201}]
    mappings = [{"id": "gpu-dc1"}, {"id": "gpu-dc2"}]

    assert filtered("GET", "/cluster/resources?type=vm", guests, ACL) == [{"vmid": 4201}]
    assert filtered("GET", "/cluster/mapping/pci?check-node=pve-dc2", mappings, ACL) == [{"id": "gpu-dc2"}]
