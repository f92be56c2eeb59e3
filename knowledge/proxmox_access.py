"""What Proxmox checks for each call the unattended repair makes, and for each call the stack makes to create the
repair's credential: one row per endpoint, as upstream's permission block writes it.

Read from the sources at these commits (cited per row by file, method name and line):
- pve-manager 14a22df3 (PVE/API2/Cluster.pm, PVE/API2/Cluster/Mapping/PCI.pm, PVE/API2/Tasks.pm,
  PVE/API2/Hardware/PCI.pm)
- qemu-server e6352be6 (src/PVE/API2/Qemu.pm, src/PVE/QemuServer.pm)
- pve-access-control 5ccd07d (src/PVE/API2/Role.pm, ACL.pm, User.pm, AccessControl.pm; src/PVE/RPCEnvironment.pm,
  src/PVE/AccessControl.pm)

The repair token's roles are derived from WATCHER_CALLS (`grants`), and the Proxmox stand-in of the e2e tier enforces
the same rows, so a call the watcher adds without a row, or a row whose privilege no role grants, fails a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How upstream decides:
# - perm: `check => ['perm', <path>, [privs]]` (all of them, unless any_of): refused with 403 otherwise.
# - filter: `user => 'all'`, and each entry is listed only where the caller holds a privilege on its path; a missing
#   grant is no error, the entry is just absent (the trap: a repair that reads "VM not found" for a 403).
# - owner: `user => 'all'` for the caller's own object (its own task, its own permissions).
Kind = Literal["perm", "filter", "owner"]


@dataclass(frozen=True)
class EndpointCheck:
    method: Literal["GET", "POST"]
    # The API path, with {node}, {vmid}, {id}, {upid} where the call fills them in.
    api_path: str
    kind: Kind
    # The ACL path upstream checks (perm, filter); "" for owner.
    acl_path: str
    # perm: every one is needed unless any_of; filter: any one of them lists the entry.
    privileges: tuple[str, ...]
    any_of: bool
    # The one privilege gpu-pool grants for it (the least of `privileges`), "" when none is needed.
    grant: str
    source: str


VM_PATH = "/vms/{vmid}"
MAPPING_PATH = "/mapping/pci/{id}"

WATCHER_CALLS: tuple[EndpointCheck, ...] = (
    EndpointCheck(
        "GET",
        "/cluster/resources?type=vm",
        "filter",
        VM_PATH,
        ("VM.Audit",),
        False,
        "VM.Audit",
        "pve-manager PVE/API2/Cluster.pm resources (l.263-267 `user => 'all'`; l.588 `next if !$rpcenv->check("
        "$authuser, \"/vms/$vmid\", ['VM.Audit'], 1)`)",
    ),
    EndpointCheck(
        "GET",
        "/cluster/mapping/pci?check-node={node}",
        "filter",
        MAPPING_PATH,
        ("Mapping.Modify", "Mapping.Use", "Mapping.Audit"),
        True,
        "Mapping.Audit",
        "pve-manager PVE/API2/Cluster/Mapping/PCI.pm index (l.24-27 `user => 'all'`; l.100-104 check_any of "
        "Mapping.Modify/Use/Audit on /mapping/pci/$id; `checks` per entry from assert_valid on check-node, l.107-130)",
    ),
    EndpointCheck(
        "GET",
        "/nodes/{node}/qemu/{vmid}/status/current",
        "perm",
        VM_PATH,
        ("VM.Audit",),
        False,
        "VM.Audit",
        "qemu-server src/PVE/API2/Qemu.pm vm_status (l.3426-3433 `check => ['perm', '/vms/{vmid}', ['VM.Audit']]`)",
    ),
    EndpointCheck(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/shutdown",
        "perm",
        VM_PATH,
        ("VM.PowerMgmt",),
        False,
        "VM.PowerMgmt",
        "qemu-server src/PVE/API2/Qemu.pm vm_shutdown (l.3857-3866 `check => ['perm', '/vms/{vmid}', "
        "['VM.PowerMgmt']]`; skiplock is root@pam only)",
    ),
    EndpointCheck(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/stop",
        "perm",
        VM_PATH,
        ("VM.PowerMgmt",),
        False,
        "VM.PowerMgmt",
        "qemu-server src/PVE/API2/Qemu.pm vm_stop (l.3682-3690 `check => ['perm', '/vms/{vmid}', ['VM.PowerMgmt']]`)",
    ),
    EndpointCheck(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/start",
        "perm",
        VM_PATH,
        ("VM.PowerMgmt",),
        False,
        "VM.PowerMgmt",
        # Mapping.Use is checked when a hostpci mapping is set (Qemu.pm l.927 check_hostpci_perm) or a backup
        # restored (QemuServer.pm l.6432-6474 check_mapping_access, called from check_restore_permissions only),
        # never by vm_start: the token needs no Mapping.Use to start a VM whose card is mapped.
        "qemu-server src/PVE/API2/Qemu.pm vm_start (l.3494-3501 `check => ['perm', '/vms/{vmid}', ['VM.PowerMgmt']]`; "
        "no Mapping.Use: QemuServer.pm check_mapping_access l.6432 runs on config change and restore only)",
    ),
    EndpointCheck(
        "GET",
        "/nodes/{node}/tasks/{upid}/status",
        "owner",
        "",
        (),
        False,
        "",
        "pve-manager PVE/API2/Tasks.pm read_task_status (l.454-460: the task's owner, else Sys.Audit on "
        "/nodes/<node>; l.27-37 a token sees its own tasks)",
    ),
    EndpointCheck(
        "GET",
        "/access/permissions",
        "owner",
        "",
        (),
        False,
        "",
        "pve-access-control src/PVE/API2/AccessControl.pm permissions (l.510-519: each user/token may dump its own)",
    ),
)

# `GET /nodes/{node}/hardware/pci` (what `gpu-pool repair` reads with the stack's credential) checks Sys.Audit or
# Sys.Modify on `/` (pve-manager PVE/API2/Hardware/PCI.pm pci_scan l.22-23): a grant on `/` the watcher avoids by
# reading the mapping's check-node answer instead.
HARDWARE_PCI_SOURCE = (
    "pve-manager PVE/API2/Hardware/PCI.pm pci_scan (l.22-23 `['perm', '/', ['Sys.Audit', 'Sys.Modify'], any => 1]`)"
)

# A token with privilege separation holds what its own ACLs grant and its user also holds (AccessControl.pm roles
# l.1804-1814: without privsep a token returns its user's roles; with it, RPCEnvironment intersects them).
PRIVSEP_SOURCE = "pve-access-control src/PVE/AccessControl.pm roles (l.1804-1814)"


@dataclass(frozen=True)
class StackNeed:
    """A privilege the stack's own credential needs to create the repair's credential."""

    what: str
    privilege: str
    path: str
    source: str


STACK_NEEDS: tuple[StackNeed, ...] = (
    StackNeed(
        "create the repair roles",
        "Sys.Modify",
        "/access",
        "pve-access-control src/PVE/API2/Role.pm create_role (l.75-80 `check => ['perm', '/access', ['Sys.Modify']]`)",
    ),
    StackNeed(
        "create the repair token under the stack's own user",
        "User.Modify",
        "/access/groups/<a group of that user>",
        # A token is never `self` for its user (RPCEnvironment.pm l.523-531 compares the full token id), so the
        # `or` falls to userid-group: User.Modify on /access/groups or on a group the user is in (l.493-515).
        "pve-access-control src/PVE/API2/User.pm generate_token (l.758-760 `'or', ['userid-param', 'self'], "
        "['userid-group', ['User.Modify']]`); src/PVE/RPCEnvironment.pm l.493-531",
    ),
    StackNeed(
        "put the repair roles on each domain's VM and mapping for the token",
        "Permissions.Modify",
        "/vms/<vmId>, /mapping/pci/<mapping>",
        "pve-access-control src/PVE/API2/ACL.pm update_acl (l.112-113 `['perm-modify', '{path}']`; l.189-213 without "
        "Permissions.Modify only a subset of the caller's own privileges); src/PVE/RPCEnvironment.pm "
        "check_perm_modify l.442-457",
    ),
    StackNeed(
        "hold what it hands the token (a privilege-separated token has only what its user also has)",
        "VM.PowerMgmt, VM.Audit, Mapping.Audit",
        "/vms/<vmId>, /mapping/pci/<mapping>",
        PRIVSEP_SOURCE,
    ),
)


# What the repair token may ever hold: the privileges its calls need, on one VM's or one mapping's path, never
# propagated. `make diff` names anything beyond it as a danger (offline/plan_diff.py), whatever changed the plan.
WATCHER_PRIVILEGES: frozenset[str] = frozenset(call.grant for call in WATCHER_CALLS if call.grant)
_NARROW_PATHS = ("/vms/", "/mapping/pci/")


def wider_than_the_watcher_needs(privileges: list[str] | None, path: str | None, propagate: bool | None) -> list[str]:
    """Why a role or ACL of the repair token grants more than its calls need (empty: it does not)."""
    problems: list[str] = []
    extra = sorted(set(privileges or ()) - WATCHER_PRIVILEGES)
    if extra:
        problems.append(f"privileges beyond what the watcher's calls need: {', '.join(extra)}")
    if path is not None:
        prefix = next((p for p in _NARROW_PATHS if path.startswith(p)), None)
        if prefix is None or "/" in path[len(prefix) :] or not path[len(prefix) :]:
            problems.append(f"an ACL on {path}, not one VM's /vms/<id> or one mapping's /mapping/pci/<id>")
    if propagate:
        problems.append(f"an ACL on {path} that propagates to everything below it")
    return problems
