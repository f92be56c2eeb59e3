"""The in-cluster health check against the real API server: its objects as the stack writes them (the API server
validates the CronJob and the RBAC), then its code run exactly as the CronJob's pod runs it (the zip from the
ConfigMap, python3 alone, the ServiceAccount's token from the TokenRequest API), reading a day-2 scenario made
real in the server and writing each GPU node's verdict as the GpuPoolHealthy condition.

What this tier cannot do is start the pod itself (there is no kubelet): the container's command is run here with
the same files, the same token and nothing else.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.health_check import (
    CODE_KEY,
    FACTS_KEY,
    NAME,
    HealthCheckBundle,
    build_health_check,
    health_check_zip,
)
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.health_condition import CONDITION
from components.stack_check import validate_stack
from day2.pool import facts_of
from offline.runner import read_stack_file
from tests.day2.pool_facts import facts_document
from tests.day2.scenarios import NODES, SCENARIOS
from tests.e2e import scenario_load
from tests.e2e.conftest import kubectl_for, reported_cluster
from tests.e2e.kube import Kubectl
from tests.e2e.servers import Cluster, Tools

NAMESPACE = "gpu-pool-health"


@pytest.fixture(scope="module")
def health_cluster(e2e_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A server of its own: the scenario's Nodes must not meet other modules' Nodes of the same names."""
    with reported_cluster(e2e_tools, tmp_path_factory.mktemp("health-kube")) as running:
        yield running


@pytest.fixture(scope="module")
def health_kubectl(e2e_tools: Tools, health_cluster: Cluster) -> Kubectl:
    return kubectl_for(e2e_tools, health_cluster)


@pytest.fixture(scope="module")
def deployed(health_kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The healthy pool, and the health check's objects applied as pulumi-kubernetes applies them; the folder
    the pod would mount (the ConfigMap's two keys)."""
    kubectl = health_kubectl
    scenario_load.load(kubectl, SCENARIOS["healthy-pool"]())
    cfg = validate_stack(
        {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
        | {"repair": {"healthCheck": {"enabled": True}}}
    )
    bundle = HealthCheckBundle(health_check_zip(), json.dumps(facts_document(facts_of(cfg, "prod"))))
    objects = build_health_check(
        cfg.repair.health_check,
        bundle,
        operator_namespace=cfg.gpu_operator.namespace,
        time_slicing_configmap=TIME_SLICING_CONFIGMAP,
        smoke_namespace=cfg.smoke_test.namespace,
    )
    for namespace in (cfg.gpu_operator.namespace, cfg.smoke_test.namespace):
        kubectl.ensure_namespace(namespace)
    for obj in objects:
        kubectl("apply", "--server-side", "--field-manager", "pulumi-kubernetes", "-f", "-", stdin=json.dumps(obj))
    mount = tmp_path_factory.mktemp("mount")
    configmap = kubectl.json("-n", NAMESPACE, "get", "configmap", NAME)
    (mount / CODE_KEY).write_bytes(base64.b64decode(configmap["binaryData"][CODE_KEY]))
    (mount / FACTS_KEY).write_text(configmap["data"][FACTS_KEY])
    return mount


def run_check(cluster: Cluster, kubectl: Kubectl, mount: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The CronJob's container command, with its ServiceAccount's token and the cluster's CA, python3 alone."""
    token = tmp_path / "token"
    token.write_text(kubectl("-n", NAMESPACE, "create", "token", NAME).strip())
    config = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    command = [
        sys.executable, "-S", "-E", "-s", str(mount / CODE_KEY), "--facts", str(mount / FACTS_KEY),
        "--server", config["server"], "--token-file", str(token), "--ca-file", config["certificate-authority"],
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def conditions(kubectl: Kubectl, node: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in kubectl.json("get", "node", node)["status"]["conditions"]}


def test_the_check_writes_a_healthy_verdict_on_every_gpu_node_and_leaves_the_kubelets_conditions_alone(
    health_cluster: Cluster, health_kubectl: Kubectl, deployed: Path, tmp_path: Path
) -> None:
    done = run_check(health_cluster, health_kubectl, deployed, tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    for node in NODES.values():
        found = conditions(health_kubectl, node)
        assert (found[CONDITION]["status"], found[CONDITION]["reason"]) == ("True", "AllFloorsOk")
        assert found["Ready"]["status"] == "True"
        assert f"{node}: healthy ({CONDITION}=True, AllFloorsOk)" in done.stdout


def test_a_crashed_driver_turns_that_nodes_verdict_false_with_the_floor_and_the_repair_command(
    health_cluster: Cluster, health_kubectl: Kubectl, deployed: Path, tmp_path: Path
) -> None:
    kubectl = health_kubectl
    run_check(health_cluster, kubectl, deployed, tmp_path)
    before = conditions(kubectl, NODES["dc1"])[CONDITION]
    pods = kubectl.json("-n", "gpu-operator", "get", "pods", "-l", "app=nvidia-driver-daemonset")["items"]
    (pod,) = [p for p in pods if p["spec"]["nodeName"] == NODES["dc2"]]
    crashed = pod["status"]
    crashed["conditions"] = [c | {"status": "False"} if c["type"] == "Ready" else c for c in crashed["conditions"]]
    crashed["containerStatuses"][0] |= {
        "ready": False,
        "restartCount": 7,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }
    kubectl("-n", "gpu-operator", "replace", "--subresource=status", "-f", "-", stdin=json.dumps(pod))

    done = run_check(health_cluster, kubectl, deployed, tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    dc2 = conditions(kubectl, NODES["dc2"])[CONDITION]
    assert (dc2["status"], dc2["reason"]) == ("False", "DriverBroken")
    assert dc2["message"].startswith("driver: ")
    assert dc2["message"].endswith(f"a faulted card: gpu-pool repair {NODES['dc2']} --stack prod")
    # A node whose verdict did not change keeps its transition time; only its heartbeat moves.
    assert conditions(kubectl, NODES["dc1"])[CONDITION]["lastTransitionTime"] == before["lastTransitionTime"]


def test_the_checks_account_may_write_node_status_and_nothing_else_of_a_node(
    health_kubectl: Kubectl, deployed: Path, tmp_path: Path
) -> None:
    token = health_kubectl("-n", NAMESPACE, "create", "token", NAME).strip()
    account = f"system:serviceaccount:{NAMESPACE}:{NAME}"

    def can(*what: str) -> bool:
        done = health_kubectl.run("auth", "can-i", *what, "--as", account)
        return done.stdout.strip() == "yes"

    assert token
    assert can("list", "nodes") and can("patch", "nodes", "--subresource=status")
    assert not can("patch", "nodes") and not can("delete", "nodes") and not can("list", "secrets", "-A")
    assert can("list", "pods", "-n", "gpu-operator") and not can("list", "pods", "-n", "kube-system")
    assert can("get", f"configmaps/{TIME_SLICING_CONFIGMAP}", "-n", "gpu-operator")
    assert not can("get", "configmaps/kube-root-ca.crt", "-n", "gpu-operator")
    assert can("list", "jobs.batch", "-n", "gpu-smoke-test")
