"""Every Kubernetes API request the watcher's steps make (day2/repair/watcher.py), as one table, and the RBAC rules
derived from it: nothing else is granted. A request is (group, resource, verb, where, name): where is a scope the
stack fills in (the stack's Nodes, any namespace, or one of the namespaces below), name a resourceName or "" (any).

The table is checked against what the loop really sends: `request_of` reads a request off its method and path as
the API server's RBAC authorizer does (k8s.io/apiserver pkg/endpoints/request RequestInfo: a GET of a collection is
`list`, of a named object `get`; POST `create`, PUT `update`, PATCH `patch`; a subresource is `resource/sub`), and
tests/unattended/test_watcher_loop.py runs every scenario against an API server that refuses what the derived Roles
do not grant, and fails on a table row no scenario used.

Standard library only: the watcher imports it in the cluster.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME, SECRET_NAME

# The scopes a request is made in.
NODE = "node"  # the stack's GPU Nodes, by resourceNames
CLUSTER = "cluster"  # any namespace (the drain: pods of any namespace on the node)
OWN = "own"  # the watcher's namespace (repair.unattended.namespace)
NODE_CHECK = "node-check"  # repair.unattended.nodeCheckNamespace
OPERATOR = "operator"  # the GPU Operator's namespace (doctor's walk)
SMOKE = "smoke"  # the smoke test's namespace (doctor's walk)
EVENTS = "events"  # Node Events go to `default`, as the kubelet's own
EVENTS_NAMESPACE = "default"
# The time-slicing ConfigMap's name, filled in from the pool facts (doctor reads it by name).
TIME_SLICING = "<time-slicing>"


@dataclass(frozen=True)
class Request:
    group: str
    resource: str
    verb: str
    where: str
    name: str = ""


# Step of the watcher -> the requests it makes.
WATCHER_API: Mapping[str, tuple[Request, ...]] = {
    "read the breaker": (Request("", "configmaps", "get", OWN, BREAKER_CONFIGMAP),),
    "record a repair that did not fix": (Request("", "configmaps", "update", OWN, BREAKER_CONFIGMAP),),
    "read the domains' Nodes": (Request("", "nodes", "get", NODE),),
    "record the verdict, the hold, the power cycle, the end": (Request("", "nodes", "patch", NODE),),
    "doctor's walk": (
        Request("", "pods", "list", OPERATOR),
        Request("", "configmaps", "get", OPERATOR, TIME_SLICING),
        Request("batch", "jobs", "list", SMOKE),
    ),
    "node-check as a Job": (
        Request("batch", "jobs", "create", NODE_CHECK),
        Request("batch", "jobs", "get", NODE_CHECK),
        Request("", "pods", "list", NODE_CHECK),
        Request("", "pods/log", "get", NODE_CHECK),
    ),
    "the Lease": (
        Request("coordination.k8s.io", "leases", "get", OWN, LEASE_NAME),
        Request("coordination.k8s.io", "leases", "update", OWN, LEASE_NAME),
    ),
    "the token": (Request("", "secrets", "get", OWN, SECRET_NAME),),
    "the drain": (Request("", "pods", "list", CLUSTER), Request("", "pods/eviction", "create", CLUSTER)),
    "Events": (Request("", "events", "create", EVENTS),),
    "the smoke test": (Request("batch", "jobs", "create", SMOKE), Request("batch", "jobs", "get", SMOKE)),
    # node/gate.py, the same gate as the wave's: the driver pods on the node, and in upgrade-failed the driver
    # DaemonSet's newest ControllerRevision and the out-of-sync pod's delete (FIELD-REVIEW-5 WRONG-2).
    "the gate": (
        Request("apps", "daemonsets", "get", OPERATOR),
        Request("apps", "controllerrevisions", "list", OPERATOR),
        Request("", "pods", "delete", OPERATOR),
    ),
}

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Attributes:
    """What the RBAC authorizer sees of one request: namespace None for a cluster-scoped object or a list across
    namespaces."""

    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str


def request_of(method: str, path: str) -> Attributes:
    """The request's RBAC attributes from its method and path (`/api/v1/...` or `/apis/<group>/<version>/...`)."""
    parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(path).path.strip("/").split("/")]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = _VERBS.get(method) or ("get" if name else "list")
    return Attributes(group, resource, verb, namespace, name)


def resolve(where: str, namespaces: Mapping[str, str]) -> str | None:
    """A scope's namespace (None: cluster-wide or cluster-scoped)."""
    return None if where in (NODE, CLUSTER) else namespaces[where]


def requests(smoke_test: bool) -> list[Request]:
    """Every request of the table (the smoke Jobs' list only where the stack runs the smoke test)."""
    return [r for rows in WATCHER_API.values() for r in rows if smoke_test or r.where != SMOKE]


def rules(
    wanted: Iterable[Request], hostnames: Sequence[str], namespaces: Mapping[str, str], time_slicing: str
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(ClusterRole rules, Role rules by namespace): verbs grouped per group, resource and name; the Nodes'
    limited to `hostnames`."""
    cluster: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    spaced: dict[str, dict[tuple[str, str, tuple[str, ...]], set[str]]] = {}
    for r in wanted:
        name = time_slicing if r.name == TIME_SLICING else r.name
        names = tuple(sorted(hostnames)) if r.where == NODE else ((name,) if name else ())
        namespace = resolve(r.where, namespaces)
        target = cluster if namespace is None else spaced.setdefault(namespace, {})
        target.setdefault((r.group, r.resource, names), set()).add(r.verb)

    def as_rules(grouped: Mapping[tuple[str, str, tuple[str, ...]], set[str]]) -> list[dict[str, Any]]:
        out = []
        for (group, resource, names), verbs in sorted(grouped.items()):
            rule: dict[str, Any] = {"apiGroups": [group], "resources": [resource]}
            if names:
                rule["resourceNames"] = list(names)
            rule["verbs"] = sorted(verbs)
            out.append(rule)
        return out

    return as_rules(cluster), {ns: as_rules(grouped) for ns, grouped in sorted(spaced.items())}


def _rule_allows(rule: Mapping[str, Any], request: Attributes) -> bool:
    names = rule.get("resourceNames") or []
    return (
        request.group in rule["apiGroups"]
        and request.resource in rule["resources"]
        and request.verb in rule["verbs"]
        and (not names or request.name in names)
    )


def authorized(
    request: Attributes, cluster: Sequence[Mapping[str, Any]], spaced: Mapping[str, Sequence[Mapping[str, Any]]]
) -> bool:
    """Whether the rules let the request through, as the RBAC authorizer decides (k8s.io/kubernetes
    plugin/pkg/auth/authorizer/rbac: a ClusterRoleBinding's rules hold in every namespace, a RoleBinding's in its
    own; resourceNames match only a request that names its object, so never a list or a create)."""
    if any(_rule_allows(rule, request) for rule in cluster):
        return True
    return request.namespace is not None and any(
        _rule_allows(rule, request) for rule in spaced.get(request.namespace, ())
    )


def row_of(request: Attributes, namespaces: Mapping[str, str]) -> Request | None:
    """The table's row a request was made under (for the test that every row is used), None if none fits."""
    for rows in WATCHER_API.values():
        for row in rows:
            namespace = resolve(row.where, namespaces)
            if (row.group, row.resource, row.verb) != (request.group, request.resource, request.verb):
                continue
            if row.where == CLUSTER or namespace == request.namespace:
                return row
    return None
