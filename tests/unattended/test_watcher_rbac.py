"""The watcher's Kubernetes RBAC is derived from its steps' requests (components/unattended/watcher_api.py): the
Roles the program registers are exactly the derived rules, Nodes are reached by name only, the token's Secret, the
breaker and the Lease each by name, and `request_of` reads a request as the API server's authorizer does. That the
loop's own requests are all in the table, and each row used, is tests/unattended/test_watcher_loop.py's."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.stack_check import validate_stack
from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME, SECRET_NAME, build_watcher_rbac
from components.unattended.rbac import watcher_rules
from components.unattended.watcher_api import Attributes, authorized, request_of
from offline.recording import RecordingMonitor, reveal
from offline.runner import read_stack_file
from tests.unattended.registered import register_unattended

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"


def stack(**unattended: Any) -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    repair = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, **unattended}}
    return validate_stack(raw | {"repair": repair})


def test_the_registered_roles_are_exactly_the_rules_derived_from_the_watchers_steps(monitor: RecordingMonitor) -> None:
    cfg = stack()
    recording = register_unattended(monitor, cfg)

    cluster = [rule for r in recording.by_type(CLUSTER_ROLE) for rule in reveal(r.inputs)["rules"]]
    spaced = {reveal(r.inputs)["metadata"]["namespace"]: reveal(r.inputs)["rules"] for r in recording.by_type(ROLE)}
    assert (cluster, spaced) == watcher_rules(cfg, TIME_SLICING_CONFIGMAP)
    assert set(spaced) == {"gpu-pool-repair", "gpu-pool-node-check", "gpu-operator", "gpu-smoke-test", "default"}


def test_node_get_and_patch_are_limited_to_the_stacks_hostnames_and_nothing_lists_or_deletes_nodes() -> None:
    cfg = stack()
    cluster, _ = watcher_rules(cfg, TIME_SLICING_CONFIGMAP)
    nodes = [r for r in cluster if r["resources"] == ["nodes"]]

    assert nodes == [
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "resourceNames": sorted(d.hostname for d in cfg.failure_domains),
            "verbs": ["get", "patch"],
        }
    ]


def test_in_its_own_namespace_the_watcher_reaches_the_token_the_breaker_and_the_lease_by_name_only() -> None:
    cfg = stack()
    _, spaced = watcher_rules(cfg, TIME_SLICING_CONFIGMAP)

    assert spaced[cfg.repair.unattended.namespace] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [BREAKER_CONFIGMAP],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET_NAME], "verbs": ["get"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE_NAME],
            "verbs": ["get", "update"],
        },
    ]


def test_a_stack_without_the_smoke_test_grants_no_read_of_its_jobs() -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    repair = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}
    cfg = validate_stack(raw | {"repair": repair, "smokeTest": {"enabled": False}})

    assert cfg.smoke_test.namespace not in watcher_rules(cfg, TIME_SLICING_CONFIGMAP)[1]


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/nodes/n1", Attributes("", "nodes", "get", None, "n1")),
        ("PATCH", "/api/v1/nodes/n1", Attributes("", "nodes", "patch", None, "n1")),
        ("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", Attributes("", "pods", "list", None, "")),
        (
            "POST",
            "/api/v1/namespaces/ml/pods/p/eviction",
            Attributes("", "pods/eviction", "create", "ml", "p"),
        ),
        ("GET", "/api/v1/namespaces/x/pods/p/log", Attributes("", "pods/log", "get", "x", "p")),
        ("POST", "/apis/batch/v1/namespaces/x/jobs", Attributes("batch", "jobs", "create", "x", "")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/r/leases/l",
            Attributes("coordination.k8s.io", "leases", "update", "r", "l"),
        ),
    ],
)
def test_a_request_is_read_as_the_api_servers_authorizer_reads_it(method: str, path: str, expected: Attributes) -> None:
    assert request_of(method, path) == expected


def test_resource_names_never_let_a_list_through_and_a_role_holds_only_in_its_namespace() -> None:
    cfg = stack()
    cluster, spaced = watcher_rules(cfg, TIME_SLICING_CONFIGMAP)

    assert authorized(request_of("GET", "/api/v1/nodes/rke2-worker-dc1-gpu-a"), cluster, spaced)
    assert not authorized(request_of("GET", "/api/v1/nodes/rke2-server-1"), cluster, spaced)
    assert not authorized(request_of("GET", "/api/v1/nodes"), cluster, spaced)
    assert not authorized(request_of("GET", "/api/v1/namespaces/gpu-pool-repair/secrets/other"), cluster, spaced)
    assert not authorized(request_of("GET", "/api/v1/namespaces/kube-system/pods/x/log"), cluster, spaced)
    assert not authorized(request_of("DELETE", "/api/v1/namespaces/ml/pods/x"), cluster, spaced)


def test_the_rbac_objects_validate_strictly_against_the_kubernetes_schema() -> None:
    cfg = stack()
    version = kubernetes_validate.latest_version()
    for obj in build_watcher_rbac(cfg.repair.unattended, *watcher_rules(cfg, TIME_SLICING_CONFIGMAP)):
        kubernetes_validate.validate(obj, version, strict=True)
