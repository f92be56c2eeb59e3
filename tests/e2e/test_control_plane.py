"""The e2e control plane's agents are the upstream programs, doing their own parts: kube-scheduler places a pod,
KWOK runs it and keeps the Node alive, kube-controller-manager's controllers create DaemonSet pods, finish Jobs, fill
quota status, create ServiceAccounts and collect garbage (tests/e2e/control_plane.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.control_plane import SERVER_NODE, ControlPlane, eventually, node_ready, register_node
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import kubelet_labels

NAMESPACE = "e2e-control-plane"
WORKER = "e2e-worker-1"


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane with a namespace and a second, plain worker Node of this module's."""
    kubectl = control_plane.kubectl
    kubectl.ensure_namespace(NAMESPACE)
    register_node(
        kubectl, WORKER, kubelet_labels(WORKER), [], {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"}}
    )
    try:
        eventually(f"node {WORKER} Ready and untainted", lambda: node_ready(kubectl, WORKER))
        yield control_plane
    finally:
        kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s")
        kubectl("delete", "node", WORKER, "--ignore-not-found")


def pods(kubectl: Kubectl, selector: str) -> list[dict[str, Any]]:
    return list(kubectl.json("-n", NAMESPACE, "get", "pods", "-l", selector)["items"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_scheduler_places_a_pod_that_kwok_then_runs_and_reports_ready(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "placed", "namespace": NAMESPACE, "labels": {"test": "placed"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": WORKER},
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
        },
    }
    kubectl.create(pod, field_manager="e2e")
    running = eventually("the pod Running and Ready", lambda: [p for p in pods(kubectl, "test=placed") if ready(p)])
    assert running[0]["spec"]["nodeName"] == WORKER, "bound by the scheduler to the one node it may run on"
    assert running[0]["status"]["phase"] == "Running"
    events = kubectl.json("-n", NAMESPACE, "get", "events", "--field-selector", "involvedObject.name=placed")["items"]
    reporters = {
        e.get("reportingComponent") or e["source"].get("component") for e in events if e["reason"] == "Scheduled"
    }
    assert reporters == {"default-scheduler"}


def test_a_deployment_becomes_available_through_its_replicaset_and_pod(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"test": "web"}},
            "template": {
                "metadata": {"labels": {"test": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]},
            },
        },
    }
    kubectl.create(deployment, field_manager="e2e")
    done = kubectl.run("-n", NAMESPACE, "rollout", "status", "deployment/web", "--timeout=120s")
    assert done.returncode == 0, done.stderr
    assert len([p for p in pods(kubectl, "test=web") if ready(p)]) == 2


def test_a_jobs_pod_runs_to_completion_and_the_job_completes(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once", "namespace": NAMESPACE},
        "spec": {
            "template": {
                "metadata": {"labels": {"test": "once"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "registry.example/run:1"}]},
            }
        },
    }
    kubectl.create(job, field_manager="e2e")
    done = kubectl.run("-n", NAMESPACE, "wait", "--for=condition=Complete", "job/once", "--timeout=120s")
    assert done.returncode == 0, done.stderr
    (pod,) = pods(kubectl, "test=once")
    assert pod["status"]["phase"] == "Succeeded"


def test_a_daemonset_gets_a_ready_pod_on_every_node_it_tolerates(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"test": "agent"}},
            "template": {
                "metadata": {"labels": {"test": "agent"}},
                "spec": {
                    "initContainers": [{"name": "init", "image": "registry.example/init:1"}],
                    "containers": [{"name": "agent", "image": "registry.example/agent:1"}],
                },
            },
        },
    }
    kubectl.create(daemonset, field_manager="e2e")
    done = kubectl.run("-n", NAMESPACE, "rollout", "status", "daemonset/agent", "--timeout=120s")
    assert done.returncode == 0, done.stderr
    nodes = {p["spec"]["nodeName"] for p in pods(kubectl, "test=agent") if ready(p)}
    assert {SERVER_NODE, WORKER} <= nodes


def test_quota_status_serviceaccounts_and_garbage_collection_are_the_controller_managers(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": NAMESPACE},
        "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
    }
    kubectl.create(quota, field_manager="e2e")
    status = eventually(
        "the quota's status",
        lambda: kubectl.json("-n", NAMESPACE, "get", "resourcequota", "gpus").get("status", {}).get("hard"),
    )
    assert status == {"requests.nvidia.com/gpu": "2"}
    assert kubectl.json("-n", NAMESPACE, "get", "serviceaccount", "default")["metadata"]["name"] == "default"
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": NAMESPACE}}
    kubectl.create(owner, field_manager="e2e")
    uid = kubectl.json("-n", NAMESPACE, "get", "configmap", "owner")["metadata"]["uid"]
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "owned", "namespace": NAMESPACE, "ownerReferences": [reference]},
    }
    kubectl.create(owned, field_manager="e2e")
    # Foreground deletion, as pulumi-kubernetes deletes: only the garbage collector can finish it.
    kubectl("-n", NAMESPACE, "delete", "configmap", "owner", "--cascade=foreground", "--timeout=60s")
    gone = kubectl.run("-n", NAMESPACE, "get", "configmap", "owned")
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_kwok_keeps_the_node_alive_through_its_lease(plane: ControlPlane) -> None:
    kubectl = plane.kubectl
    lease = kubectl.json("-n", "kube-node-lease", "get", "lease", WORKER)
    (owner,) = lease["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Node", WORKER), "the node's own Lease, as a kubelet keeps it"
    renewed = lease["spec"]["renewTime"]
    eventually(
        "the lease renewed",
        lambda: kubectl.json("-n", "kube-node-lease", "get", "lease", WORKER)["spec"]["renewTime"] != renewed,
        seconds=60,
    )
    node = kubectl.json("get", "node", WORKER)
    assert json.dumps(node["status"]["nodeInfo"]).count("kwok") >= 1, "KWOK reported the kubelet's nodeInfo"
