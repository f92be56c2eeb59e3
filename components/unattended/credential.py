"""The unattended repair's Proxmox credential, as a pure plan: two roles, one privilege-separated token, and an ACL
per GPU domain's VM and card mapping, each without propagation. Nothing on `/`, on `/vms` or on all mappings.

The roles' privileges are derived from the calls the watcher makes (knowledge/proxmox_access.py WATCHER_CALLS,
each row citing upstream's permission block), so the token can do what the repair needs and nothing else:
power-cycle and read the domains' VMs, and read their PCI mappings with the host's check of the card
(`GET /cluster/mapping/pci?check-node=<proxmoxNode>`), instead of `hardware/pci`, which needs Sys.Audit on `/`.

A domain with a card passed through by raw id is not eligible: its VM was created by root@pam (qemu-server refuses
a raw hostpci to anyone else) and checking its card without a mapping needs `/`; the watcher leaves it to a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.gpu_failure_domain.proxmox_vm import mapping_name
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig
from knowledge.proxmox_access import MAPPING_PATH, VM_PATH, WATCHER_CALLS

# pve-access-control: a role id is `[A-Za-z0-9\.\-_]+` (pve-roleid), a token name `[A-Za-z][A-Za-z0-9\.\-_]+`
# (pve-tokenid); a stack name may hold other characters.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
TOKEN_SECRET_KEY = "token"


@dataclass(frozen=True)
class Role:
    role_id: str
    privileges: tuple[str, ...]


@dataclass(frozen=True)
class AclRow:
    domain: str
    path: str
    role_id: str
    # Never propagated: a grant on /vms/4201 must not reach anything below it, nor /mapping/pci/gpu-dc1 another.
    propagate: bool = False


@dataclass(frozen=True)
class CredentialPlan:
    vm_role: Role
    mapping_role: Role
    token_name: str
    acls: tuple[AclRow, ...]
    # Domains the watcher leaves to a person, each with why.
    not_eligible: tuple[tuple[str, str], ...]

    @property
    def roles(self) -> tuple[Role, ...]:
        return (self.vm_role, self.mapping_role)

    @property
    def eligible(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(row.domain for row in self.acls))


def privileges_on(acl_path: str) -> tuple[str, ...]:
    """The privileges the watcher's calls need on one kind of ACL path, from the endpoint table."""
    return tuple(sorted({call.grant for call in WATCHER_CALLS if call.acl_path == acl_path and call.grant}))


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text)


def why_not_eligible(domain: FailureDomainConfig) -> str | None:
    raw = [domain.card_key(i) for i, card in enumerate(domain.cards) if card.passthrough != "mapping"]
    if raw:
        return (
            f"gpu-pool:failureDomains[{domain.name}].{', '.join(raw)}: passed through by raw id, not a resource "
            "mapping: the watcher's token could only check such a card with Sys.Audit on /; the watcher leaves this "
            "domain to `gpu-pool repair` (use passthrough: mapping to make it eligible)"
        )
    return None


def credential_plan(stack: StackConfig, stack_name: str) -> CredentialPlan:
    suffix = _safe(stack_name)
    vm_role = Role(f"GpuPoolRepairVm-{suffix}", privileges_on(VM_PATH))
    mapping_role = Role(f"GpuPoolRepairMapping-{suffix}", privileges_on(MAPPING_PATH))
    acls: list[AclRow] = []
    excluded: list[tuple[str, str]] = []
    for domain in stack.failure_domains:
        why = why_not_eligible(domain)
        if why is not None:
            excluded.append((domain.name, why))
            continue
        acls.append(AclRow(domain.name, VM_PATH.format(vmid=domain.vm_id), vm_role.role_id))
        acls.extend(
            AclRow(domain.name, MAPPING_PATH.format(id=mapping_name(domain, index)), mapping_role.role_id)
            for index in range(len(domain.cards))
        )
    token = f"gpu-pool-repair-{suffix}-g{stack.repair.unattended.token_generation}"
    return CredentialPlan(vm_role, mapping_role, token, tuple(acls), tuple(excluded))


def user_of(credential: str) -> str:
    """The Proxmox user the stack logs in as: `user@realm` of its API token (`user@realm!id=secret`), or
    root@pam with a password. The repair token is this user's: a privilege-separated token holds only what its
    own ACLs grant and its user also holds (pve-access-control AccessControl.pm roles), and the stack's user holds
    every privilege it creates the VMs and mappings with."""
    return credential.split("!", 1)[0] if "!" in credential else "root@pam"


def api_token(token_id: str, value: str) -> str:
    """`user@realm!name=<uuid>`, whether the provider's `value` is the bare secret or already the whole token."""
    return value if value.startswith(f"{token_id}=") else f"{token_id}={value}"


def credential_lines(plan: CredentialPlan) -> list[str]:
    """What the preview and `make diff` say of the credential: each role's privileges and each ACL's path."""
    lines = [
        f"Proxmox token {plan.token_name} (privilege separation on), of the stack's own user; roles:",
        *(f"  {role.role_id}: {', '.join(role.privileges)}" for role in plan.roles),
        "  ACLs (no propagation):",
        *(f"    {row.path} -> {row.role_id} ({row.domain})" for row in plan.acls),
    ]
    lines += [f"  not eligible: {why}" for _, why in plan.not_eligible]
    return lines


def credential_dangers(stack: StackConfig, plan: CredentialPlan) -> list[str]:
    """Where a stack option would widen what the token can do, or leaves a domain out of the unattended repair."""
    dangers = [f"repair.unattended: {why}" for _, why in plan.not_eligible]
    if stack.repair.allow_ha_managed:
        dangers.append(
            "repair.allowHaManaged with repair.unattended: the watcher's stop and start of an HA-managed VM are HA "
            "requests the CRM may place on another host with the mapping; the token grants nothing there, so such a "
            "repair stops with the VM elsewhere and the node cordoned (a person finishes it)"
        )
    if stack.proxmox.auth == "rootPassword":
        dangers.append(
            "proxmox.auth rootPassword with repair.unattended: the watcher's token is root@pam's; privilege "
            "separation keeps it to its ACLs, and the watcher refuses to run if /access/permissions shows more"
        )
    return dangers
