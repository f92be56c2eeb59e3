"""The watcher's Kubernetes RBAC is derived from the repair turn's steps: every kubectl call the turn makes (read
from the node-steps script's source and the drain's shell command) has its API requests in the Roles, and the Roles
grant nothing no step asks for. Checked on the objects the real program registers."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from components.stack_check import validate_stack
from components.unattended.objects import build_watcher_rbac
from components.unattended.rbac import (
    KUBECTL_API,
    Use,
    requests_of,
    script_uses,
    shell_uses,
    turn_uses,
    watcher_rules,
)
from offline.recording import RecordingMonitor, reveal
from offline.runner import read_stack_file
from tests.unattended.registered import register_unattended

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"


def stack() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})


def granted(cluster: list[dict[str, Any]], spaced: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str, str, str]]:
    """Every (group, resource, verb, where) a set of rules grants, where = 'node', 'cluster' or the namespace."""
    out = set()
    for rule in cluster:
        where = "node" if rule.get("resourceNames") else "cluster"
        out |= {(rule["apiGroups"][0], rule["resources"][0], verb, where) for verb in rule["verbs"]}
    for namespace, rules in spaced.items():
        out |= {(r["apiGroups"][0], r["resources"][0], verb, namespace) for r in rules for verb in r["verbs"]}
    return out


def test_every_kubectl_call_of_the_repair_turn_has_its_api_requests_known() -> None:
    uses = turn_uses(stack())

    assert {u.step for u in uses} >= {"wave-drain", "power-cycle", "cuda-smoke-test", "rollout"}
    assert requests_of(uses)[1] == []


def test_the_roles_grant_exactly_what_the_steps_use_and_nothing_more(monitor: RecordingMonitor) -> None:
    cfg = stack()
    requests, _ = requests_of(turn_uses(cfg))
    where = {"operator": "gpu-operator", "smoke": "gpu-smoke-test", "events": "default", "node": "node"}
    expected = {(g, r, v, where.get(s, s)) for g, r, v, s in requests}
    recording = register_unattended(monitor, cfg)

    cluster = [
        rule
        for r in recording.by_type(CLUSTER_ROLE)
        if r.name.startswith("unattended-repair-turn")
        for rule in reveal(r.inputs)["rules"]
    ]
    spaced = {
        reveal(r.inputs)["metadata"]["namespace"]: reveal(r.inputs)["rules"]
        for r in recording.by_type(ROLE)
        if r.name.startswith("unattended-repair-turn")
    }
    assert granted(cluster, spaced) == expected


def test_node_get_and_patch_are_limited_to_the_stacks_hostnames_and_nothing_lists_or_deletes_nodes() -> None:
    cfg = stack()
    cluster, _ = watcher_rules(cfg)
    nodes = [r for r in cluster if r["resources"] == ["nodes"]]

    assert nodes == [
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "resourceNames": sorted(d.hostname for d in cfg.failure_domains),
            "verbs": ["get", "patch"],
        }
    ]


def test_a_step_that_starts_using_an_unknown_kubectl_command_fails_the_derivation() -> None:
    source = 'def step_x(kubectl, name, minutes):\n    kubectl.must("delete", "node", name)\n'

    uses = script_uses(source, {"x": "step_x"})
    assert requests_of(uses)[1] == [Use("x", "step_x:2", ("delete", "node"))]
    assert requests_of(shell_uses("s", "kubectl cordon n1"))[1] != []


def test_advice_quoted_in_a_shell_command_is_not_a_call() -> None:
    assert shell_uses("s", "kubectl annotate node n 'why=kubectl get pdb -A'") == [
        Use("s", "shell", ("annotate", "node"))
    ]


def test_helpers_a_step_calls_are_followed() -> None:
    source = (
        "def helper(kubectl):\n    kubectl.json('-n', ns, 'get', 'pods')\n"
        "def step_y(kubectl, name, minutes):\n    helper(kubectl)\n"
    )
    assert [u.words for u in script_uses(source, {"y": "step_y"})] == [("get", "pods")]


@pytest.mark.parametrize("key", sorted(KUBECTL_API, key=str))
def test_every_table_entry_is_used_by_the_turn_or_a_documented_shape(key: tuple[str, ...]) -> None:
    used = {u.words for u in turn_uses(stack())}
    assert key in used, f"KUBECTL_API entry {key} is used by no step of the repair turn: remove it"


def test_the_rbac_objects_validate_strictly_against_the_kubernetes_schema() -> None:
    cfg = stack()
    version = kubernetes_validate.latest_version()
    for obj in build_watcher_rbac(cfg.repair.unattended, *watcher_rules(cfg)):
        kubernetes_validate.validate(obj, version, strict=True)
