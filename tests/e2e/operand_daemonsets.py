"""The GPU Operator's operand DaemonSets as the operator creates them, for tests on the e2e control plane that run
no operator (tests/e2e/test_wave.py, tests/e2e/test_repair.py): kube-controller-manager's DaemonSet controller makes
their pods, kube-scheduler places them, KWOK runs them Ready.

Only what the program and `doctor` read of them is set: the name and the `app` label the operator selects its
pods by (knowledge/gpu_operator.py, from the operator's assets/state-*/0500_daemonset.yaml), the container names,
the driver's image tag (the driver version), the GPU taint tolerated, and the nodes they run on. A test that
needs the operator itself runs it (tests/e2e/cluster_programs.py, tests/e2e/test_driver_wave.py).
"""

from __future__ import annotations

from typing import Any

from components.shared.node_marking import GpuNodeMarking
from config.stack import StackConfig
from knowledge.gpu_operator import (
    CONFIG_MANAGER_CONTAINER,
    DEVICE_PLUGIN_APP,
    DEVICE_PLUGIN_CONTAINER,
    DRIVER_APP,
    DRIVER_CONTAINER,
    OPERAND_APP_LABEL,
)
from tests.e2e.kube import Kubectl


def _operand(
    cfg: StackConfig, marking: GpuNodeMarking, app: str, hosts: list[str], containers: list[dict[str, str]]
) -> dict[str, Any]:
    on_hosts = {"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": app, "namespace": cfg.gpu_operator.namespace},
        "spec": {
            "selector": {"matchLabels": {OPERAND_APP_LABEL: app}},
            # The operator's operand DaemonSets are OnDelete: a pod is replaced only when the operator deletes it.
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": {OPERAND_APP_LABEL: app}},
                "spec": {
                    "tolerations": [marking.toleration],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [on_hosts]}]
                            }
                        }
                    },
                    "containers": containers,
                },
            },
        },
    }


def driver_daemonset(cfg: StackConfig, marking: GpuNodeMarking, hosts: list[str]) -> dict[str, Any]:
    """The driver DaemonSet (its pods run the stack's driver: the image tag), on these nodes."""
    image = f"nvcr.io/nvidia/driver:{cfg.gpu_operator.driver_version}-ubuntu24.04"
    return _operand(cfg, marking, DRIVER_APP, hosts, [{"name": DRIVER_CONTAINER, "image": image}])


def device_plugin_daemonset(cfg: StackConfig, marking: GpuNodeMarking, hosts: list[str]) -> dict[str, Any]:
    """The device plugin's DaemonSet, on these nodes: once its pod on a node is Ready, the cluster stand-in reports
    the node's `nvidia.com/gpu` as the real plugin advertised it (tests/e2e/cluster_standin.py)."""
    # The image the v26.7.0 chart names (values.yaml devicePlugin); nothing pulls it here.
    image = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    containers = [{"name": DEVICE_PLUGIN_CONTAINER, "image": image}, {"name": CONFIG_MANAGER_CONTAINER, "image": image}]
    return _operand(cfg, marking, DEVICE_PLUGIN_APP, hosts, containers)


def ready_hosts(kubectl: Kubectl, namespace: str, app: str = DRIVER_APP) -> set[str]:
    """The nodes where a pod of operand `app` runs Ready (and is not going)."""
    pods = kubectl.api.items(f"/api/v1/namespaces/{namespace}/pods", f"{OPERAND_APP_LABEL}={app}")
    return {
        p["spec"].get("nodeName", "")
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])
    }
