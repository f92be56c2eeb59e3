"""The GPU Operator's own controller reconciles the ClusterPolicy that `pulumi up` installed, and the program reads
what it wrote.

On the `deployed` stack (tests/e2e/engine_deployed.py): the operator's process (v26.7.0, built from source) started
once the chart's pod ran, over the three GPU Nodes with the labels NFD would set. It labelled the nodes, created its
operand DaemonSets; kube-controller-manager created their pods, kube-scheduler was not needed for them (DaemonSet
pods are bound by the controller), KWOK ran them. The `up` itself passed each domain's gpu-ready gate (the driver pod
Ready on the pinned driver, upgrade state done) and its smoke test, whose pod Kyverno mutated and kube-scheduler
placed.
"""

from __future__ import annotations

from typing import Any

from components.gpu_failure_domain.smoke_test import UNSCHEDULABLE_TOLERATION
from knowledge.gpu_operator import (
    DEVICE_PLUGIN_APP,
    DRIVER_APP,
    DRIVER_UPGRADE_STATE_LABEL,
    GPU_FEATURE_DISCOVERY_APP,
    OPERATOR_VALIDATOR_APP,
    TOOLKIT_APP,
)
from offline.runner import ROOT_DIR
from tests.day2.cli_helpers import run
from tests.e2e.engine_deployed import Deployed
from tests.e2e.kube import Kubectl

OPERANDS = (DRIVER_APP, TOOLKIT_APP, DEVICE_PLUGIN_APP, GPU_FEATURE_DISCOVERY_APP, OPERATOR_VALIDATOR_APP)


def hosts(deployed: Deployed) -> dict[str, str]:
    return {d["name"]: d["hostname"] for d in deployed.base["gpu-pool:failureDomains"]}


def namespace(deployed: Deployed) -> str:
    return str(deployed.base["gpu-pool:gpuOperator"].get("namespace", "gpu-operator"))


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def pods_of(kubectl: Kubectl, ns: str, app: str) -> list[dict[str, Any]]:
    return list(kubectl.json("-n", ns, "get", "pods", "-l", f"app={app}")["items"])


def test_the_operator_reconciled_the_clusterpolicy_pulumi_up_installed_to_ready(deployed: Deployed) -> None:
    kubectl = deployed.plane.kubectl
    policy = kubectl.json("get", "clusterpolicies.nvidia.com", "cluster-policy")
    assert policy["status"]["state"] == "ready", policy.get("status")
    assert policy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", "the chart's, through the release"


def test_the_operator_labelled_every_gpu_node_for_its_operands(deployed: Deployed) -> None:
    kubectl = deployed.plane.kubectl
    for host in hosts(deployed).values():
        labels = kubectl.json("get", "node", host)["metadata"]["labels"]
        assert labels["nvidia.com/gpu.present"] == "true", host
        for operand in ("driver", "container-toolkit", "device-plugin", "gpu-feature-discovery", "operator-validator"):
            assert labels[f"nvidia.com/gpu.deploy.{operand}"] == "true", (host, operand)
        assert labels[DRIVER_UPGRADE_STATE_LABEL] == "upgrade-done", host


def test_every_operand_daemonset_is_the_operators_and_runs_a_ready_pod_on_every_gpu_node(deployed: Deployed) -> None:
    kubectl, ns = deployed.plane.kubectl, namespace(deployed)
    daemonsets = {d["metadata"]["name"]: d for d in kubectl.json("-n", ns, "get", "daemonsets")["items"]}
    for app in OPERANDS:
        daemonset = daemonsets[app]
        owners = {(o["kind"], o["name"]) for o in daemonset["metadata"].get("ownerReferences") or []}
        assert ("ClusterPolicy", "cluster-policy") in owners, app
        status = daemonset["status"]
        assert status["desiredNumberScheduled"] == status["numberReady"] == len(hosts(deployed)), (app, status)
        on = {p["spec"]["nodeName"] for p in pods_of(kubectl, ns, app) if ready(p)}
        assert on == set(hosts(deployed).values()), app


def test_the_driver_pods_run_the_pinned_driver_as_the_daemonset_controller_created_them(deployed: Deployed) -> None:
    kubectl, ns = deployed.plane.kubectl, namespace(deployed)
    driver = deployed.base["gpu-pool:gpuOperator"]["driverVersion"]
    for pod in pods_of(kubectl, ns, DRIVER_APP):
        image = pod["spec"]["containers"][0]["image"]
        assert image.endswith(f":{driver}-ubuntu24.04"), image
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("DaemonSet", DRIVER_APP)
        assert "controller-revision-hash" in pod["metadata"]["labels"]


def test_each_smoke_test_pod_was_mutated_by_kyverno_and_placed_on_its_node_by_the_scheduler(deployed: Deployed) -> None:
    kubectl = deployed.plane.kubectl
    smoke_ns = deployed.base.get("gpu-pool:smokeTest", {}).get("namespace", "gpu-smoke-test")
    jobs = kubectl.json("-n", smoke_ns, "get", "jobs", "-l", "app.kubernetes.io/name=cuda-smoke-test")["items"]
    assert {j["metadata"]["labels"]["gpu-pool/domain"] for j in jobs} == set(hosts(deployed))
    # The pods as the first `up` left them (a later wave's drain evicts a finished pod).
    pods, events = deployed.first_smoke["pods"]["items"], deployed.first_smoke["events"]["items"]
    for job in jobs:
        domain = job["metadata"]["labels"]["gpu-pool/domain"]
        assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"]), domain
        template = job["spec"]["template"]["spec"]
        assert template["tolerations"] == [UNSCHEDULABLE_TOLERATION], "the Job asks for no GPU toleration itself"
        (pod,) = [p for p in pods if p["metadata"]["labels"].get("job-name") == job["metadata"]["name"]]
        assert pod["spec"]["nodeName"] == hosts(deployed)[domain]
        assert len(pod["spec"]["tolerations"]) > len(template["tolerations"]), "Kyverno added the GPU toleration"
        assert pod["status"]["phase"] == "Succeeded"
        scheduled = {
            e.get("reportingComponent") or e["source"].get("component")
            for e in events
            if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == pod["metadata"]["name"]
        }
        assert scheduled == {"default-scheduler"}, domain


def test_gpu_pool_doctor_reads_what_the_operator_wrote_and_passes_every_node(deployed: Deployed) -> None:
    result = run(
        "doctor",
        "-o",
        "json",
        "--stack",
        "prod",
        "--stack-dir",
        str(ROOT_DIR),
        "--kubeconfig",
        str(deployed.plane.kubeconfig),
    )
    verdicts = {v["node"]: v for v in result.json()}
    assert set(hosts(deployed).values()) <= set(verdicts), result.out
    assert result.code == 0, result.out
    for host in hosts(deployed).values():
        assert verdicts[host]["firstBroken"] is None, verdicts[host]
