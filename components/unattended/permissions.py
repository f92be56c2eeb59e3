"""Two readings of `GET /access/permissions` (pve-access-control API2/AccessControl.pm `permissions`: the caller's
own effective privileges, as `{path: {privilege: propagate}}`), as pure checks:

- `stack_credential_missing`: what the stack's own credential lacks to create the repair's credential
  (knowledge/proxmox_access.py STACK_NEEDS), for the live preflight to name before `up` fails half-way.
- `beyond_the_role`: what the watcher's token holds beyond its plan (components/unattended/credential.py), which
  the watcher reads at start and before each repair and refuses on (an Event and a metric): a token someone widened
  by hand in the Proxmox UI is not the one the stack reviewed.

Inheritance as pve-access-control's `roles` walks the ACL tree: a path's own entry, else the nearest ancestor's
propagated privileges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.unattended.credential import CredentialPlan

Answer = Mapping[str, Mapping[str, Any]]


def effective(answer: Answer, path: str) -> set[str]:
    """The privileges held on `path`: its own entry, else the nearest ancestor's propagated ones."""
    if path in answer:
        return set(answer[path])
    parts = path.rstrip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        parent = "/".join(parts) or "/"
        # An ancestor's entry counts below it only where it propagates; one that propagates nothing leaves the
        # grants above it in force (pve-access-control AccessControl.pm roles l.1836-1849: `$roles = $new` only
        # where a role applies).
        propagated = {priv for priv, propagate in answer.get(parent, {}).items() if propagate}
        if propagated:
            return propagated
    return set()


def stack_credential_missing(answer: Answer, plan: CredentialPlan, user_groups: tuple[str, ...] = ()) -> list[str]:
    """Each privilege the stack's credential lacks to create the roles, the token and the ACLs, with the path."""
    missing: list[str] = []
    if "Sys.Modify" not in effective(answer, "/access"):
        missing.append("Sys.Modify on /access (to create the repair roles)")
    group_paths = ["/access/groups", *(f"/access/groups/{g}" for g in user_groups)]
    if not any("User.Modify" in effective(answer, p) for p in group_paths):
        missing.append("User.Modify on /access/groups/<a group of the stack's user> (to create the repair token)")
    for row in plan.acls:
        held = effective(answer, row.path)
        modify = {"Permissions.Modify", *(["VM.Allocate"] if row.path.startswith("/vms/") else [])}
        if not held & modify:
            missing.append(f"Permissions.Modify on {row.path} (to put {row.role_id} there for the token)")
        role = plan.vm_role if row.role_id == plan.vm_role.role_id else plan.mapping_role
        lacking = sorted(set(role.privileges) - held)
        if lacking:
            missing.append(
                f"{', '.join(lacking)} on {row.path} (a privilege-separated token holds only what its user holds)"
            )
    return missing


def beyond_the_role(answer: Answer, plan: CredentialPlan) -> list[str]:
    """Every privilege the watcher's token holds beyond its plan: on a path the plan gives it nothing, a privilege
    its role there lacks, or a grant that propagates."""
    allowed: dict[str, set[str]] = {}
    for row in plan.acls:
        role = plan.vm_role if row.role_id == plan.vm_role.role_id else plan.mapping_role
        allowed.setdefault(row.path, set()).update(role.privileges)
    problems: list[str] = []
    for path, privileges in sorted(answer.items()):
        extra = sorted(set(privileges) - allowed.get(path, set()))
        if extra:
            problems.append(f"{', '.join(extra)} on {path}")
        propagated = sorted(priv for priv, propagate in privileges.items() if propagate)
        if propagated:
            problems.append(f"{', '.join(propagated)} on {path} propagated to everything below it")
    return problems
