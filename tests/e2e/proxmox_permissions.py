"""The Proxmox stand-in's permission checks for a limited API token, from knowledge/proxmox_access.py's table
(WATCHER_CALLS: each endpoint's upstream check, cited there to pve-manager, qemu-server and pve-access-control):

- a call with no row is refused (403): the watcher calling anything its role was not derived for fails a test;
- `perm`: every privilege (or any one, `any_of`) on the row's ACL path, as RPCEnvironment check_perm reads it: the
  path's own ACL entry, else the nearest ancestor's propagated one;
- `filter`: the call succeeds, and each entry the token holds none of the privileges on is left out of the answer
  (upstream's `user => 'all'` listings: a missing grant reads as an absent VM, never an error);
- `owner`: the token's own object (its tasks, its own permissions).

A privilege-separated token's ACLs are given as `{path: {privilege: propagate}}`, what `GET /access/permissions`
answers for it (pve-access-control AccessControl.pm permissions).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from knowledge.proxmox_access import WATCHER_CALLS, EndpointCheck

Acl = Mapping[str, Mapping[str, int]]


def _pattern(api_path: str) -> re.Pattern[str]:
    escaped = re.escape(api_path)
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/?&]+)", escaped) + "$")


_ROWS = [(call, _pattern(call.api_path)) for call in WATCHER_CALLS]


def row_for(method: str, path: str) -> tuple[EndpointCheck, dict[str, str]] | None:
    """The table's row for a call (path with its query, as sent), and what it filled in for {node}, {vmid}, ..."""
    for call, pattern in _ROWS:
        match = pattern.match(path)
        if call.method == method and match:
            return call, match.groupdict()
    return None


def held(acl: Acl, path: str) -> set[str]:
    """The privileges on `path`: its own entry, else the nearest ancestor's propagated ones."""
    if path in acl:
        return set(acl[path])
    parts = path.rstrip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        propagated = {p for p, on in acl.get("/".join(parts) or "/", {}).items() if on}
        if propagated:
            return propagated
    return set()


def refusal(method: str, path: str, acl: Acl) -> str | None:
    """Why the call is refused (None: allowed)."""
    found = row_for(method, path)
    if found is None:
        return f"Permission check failed ({method} {path} is no call of the repair token's table)"
    call, values = found
    if call.kind != "perm":
        return None
    acl_path = call.acl_path.format(**values)
    have = held(acl, acl_path) & set(call.privileges)
    if (call.any_of and not have) or (not call.any_of and have != set(call.privileges)):
        return f"Permission check failed ({acl_path}, {', '.join(call.privileges)})"
    return None


def filtered(method: str, path: str, data: Any, acl: Acl) -> Any:
    """A `filter` endpoint's answer with only the entries the token may see."""
    found = row_for(method, path)
    if found is None or found[0].kind != "filter" or not isinstance(data, list):
        return data
    call = found[0]
    kept = []
    for entry in data:
        acl_path = call.acl_path.format(vmid=entry.get("vmid"), id=entry.get("id"))
        if held(acl, acl_path) & set(call.privileges):
            kept.append(entry)
    return kept
