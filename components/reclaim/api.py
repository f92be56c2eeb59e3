"""Every Kubernetes API request the notebook reclaim policy makes (day2/reclaim/policy.py), as one table, and its
ClusterRole's rules derived from it: nothing else is granted. It reads the pool (Nodes, Pods, Namespaces for their
exclusion label, ResourceQuotas, Notebooks), patches Notebooks (the warning, Kubeflow's stop, a withdrawn warning) and
posts Events on them, in whatever namespace a notebook is: list, patch and create, never get, watch, update or
delete. Prometheus is read over HTTP, not through the API server.

tests/reclaim/test_policy_runner.py checks the table against the requests a pass really sends (read off their method
and path as the API server's RBAC authorizer reads them) and fails on a row no pass used; the e2e tier runs the policy
as its ServiceAccount bound to these rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.kubeflow import NOTEBOOK_GROUP, NOTEBOOK_PLURAL


@dataclass(frozen=True)
class Request:
    group: str
    resource: str
    verb: str


POLICY_API: Mapping[str, tuple[Request, ...]] = {
    "read the pool": (
        Request("", "nodes", "list"),
        Request("", "pods", "list"),
        Request("", "namespaces", "list"),
        Request("", "resourcequotas", "list"),
        Request(NOTEBOOK_GROUP, NOTEBOOK_PLURAL, "list"),
    ),
    "warn, stop, withdraw a warning": (Request(NOTEBOOK_GROUP, NOTEBOOK_PLURAL, "patch"),),
    "Events on the Notebooks": (Request("", "events", "create"),),
}


def requests() -> list[Request]:
    return [request for rows in POLICY_API.values() for request in rows]


def cluster_rules() -> list[dict[str, Any]]:
    """The ClusterRole's rules: one per group and resource, with the verbs the table names for it."""
    grouped: dict[tuple[str, str], set[str]] = {}
    for request in requests():
        grouped.setdefault((request.group, request.resource), set()).add(request.verb)
    return [
        {"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
        for (group, resource), verbs in sorted(grouped.items())
    ]


def policy_lines() -> list[str]:
    """What the preview says its account may do, step by step (the rows the rules come from)."""
    return [
        f"  {step}: {'; '.join(f'{r.verb} {r.resource}' for r in rows)} (any namespace)"
        for step, rows in POLICY_API.items()
    ]
