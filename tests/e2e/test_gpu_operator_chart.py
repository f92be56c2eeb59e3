"""The gpu-operator chart as the release installs it: accepted by the real API server, every trap fix in place.

The fixes are read from what the chart renders (and the server would store), not from the values the program
passes: a value the chart ignores or the CRD prunes would not show up here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.gpu_platform.dcgm_metrics import build_dcgm_metrics_csv, metrics_digest
from tests.e2e.chart import CHART_VERSION, Rendered, package_chart, render_release
from tests.e2e.kube import Kubectl
from tests.e2e.servers import Tools
from tests.e2e.stacks import OPTIONS_TAINT, Previewed

CONTROL_PLANE = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
# Operands the A1000 pool never needs (no MIG, no vGPU, no sandboxes, no GPUDirect; the exporter embeds DCGM).
DISABLED_OPERANDS = ("migManager", "vgpuManager", "vgpuDeviceManager", "sandboxWorkloads", "gds", "gdrcopy", "dcgm")


@pytest.fixture(scope="module")
def chart_archive(e2e_tools: Tools, upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_chart(e2e_tools, upstream, tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module")
def prod_chart(
    prod_stack: Previewed,
    e2e_tools: Tools,
    kubectl: Kubectl,
    crds: list[str],
    chart_archive: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Rendered:
    return render_release(prod_stack, e2e_tools, kubectl, chart_archive, tmp_path_factory.mktemp("prod-chart"))


@pytest.fixture(scope="module")
def options_chart(
    options_stack: Previewed,
    e2e_tools: Tools,
    kubectl: Kubectl,
    crds: list[str],
    chart_archive: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Rendered:
    return render_release(options_stack, e2e_tools, kubectl, chart_archive, tmp_path_factory.mktemp("options-chart"))


@pytest.mark.parametrize("which", ["prod", "options"])
def test_the_api_server_accepts_everything_the_chart_renders_with_the_release_values(
    which: str, request: pytest.FixtureRequest
) -> None:
    chart: Rendered = request.getfixturevalue(f"{which}_chart")
    assert not chart.problems, "the API server rejected:\n" + "\n".join(chart.problems)
    assert len(chart.stored) == len(chart.objects)


def test_the_stored_cluster_policy_carries_every_trap_fix(prod_chart: Rendered) -> None:
    spec = prod_chart.find("ClusterPolicy", "cluster-policy", stored=True)["spec"]
    driver = spec["driver"]
    assert driver["version"] == prod_chart.stack.config.gpu_operator.driver_version == "595.91.07"
    assert driver["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}}
    assert driver["usePrecompiled"] is False
    assert driver["kernelModuleType"] == "auto"
    # The wave owns the order of driver upgrades: no upgrade slot of the operator's own (an integer 0 in the stored
    # object: the chart's `| default "25%"` would have turned an integer 0 in the values into 25%).
    assert driver["upgradePolicy"]["autoUpgrade"] is True
    assert driver["upgradePolicy"]["maxUnavailable"] == 0
    assert spec["cdi"]["enabled"] is True
    assert spec["cdi"]["nriPluginEnabled"] is False
    assert spec["toolkit"]["env"] == [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}]
    assert spec["operator"]["runtimeClass"] == "nvidia"
    assert spec["daemonsets"]["priorityClassName"] == "system-node-critical"
    assert spec["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": ""}
    exporter = spec["dcgmExporter"]
    assert exporter["resources"] == {"limits": {"memory": "1Gi"}}
    assert exporter["config"] == {"name": "dcgm-custom-metrics"}
    assert exporter["annotations"] == {"gpu-pool/dcgm-metrics-sha256": metrics_digest(build_dcgm_metrics_csv())}
    assert exporter["serviceMonitor"]["enabled"] is True
    assert {operand: spec[operand]["enabled"] for operand in DISABLED_OPERANDS} == dict.fromkeys(
        DISABLED_OPERANDS, False
    )


def test_the_chart_creates_neither_configmap_the_program_owns(prod_chart: Rendered) -> None:
    # Two owners of one ConfigMap fight on every run; the program creates both before the release.
    names = {obj["metadata"]["name"] for obj in prod_chart.objects if obj["kind"] == "ConfigMap"}
    assert not names & {"time-slicing-config", "dcgm-custom-metrics"}


def test_the_nfd_master_tolerates_the_control_plane(prod_chart: Rendered) -> None:
    master = prod_chart.find("Deployment", "gpu-operator-node-feature-discovery-master")
    assert CONTROL_PLANE in master["spec"]["template"]["spec"]["tolerations"]


def test_the_operator_runs_the_image_of_the_pinned_chart_version(prod_chart: Rendered) -> None:
    operator = prod_chart.find("Deployment", "gpu-operator")
    images = [container["image"] for container in operator["spec"]["template"]["spec"]["containers"]]
    assert images == [f"nvcr.io/nvidia/gpu-operator:{CHART_VERSION}"]


def test_the_operands_tolerate_the_gpu_taint_a_stack_configures(options_chart: Rendered) -> None:
    key, _, effect = OPTIONS_TAINT
    spec = options_chart.find("ClusterPolicy", "cluster-policy", stored=True)["spec"]
    assert {"key": key, "operator": "Exists", "effect": effect} in spec["daemonsets"]["tolerations"]


def test_extra_values_for_operands_gpu_pool_does_not_set_reach_the_cluster_policy(options_chart: Rendered) -> None:
    spec = options_chart.find("ClusterPolicy", "cluster-policy", stored=True)["spec"]
    assert spec["nodeStatusExporter"]["enabled"] is True
    assert spec["validator"]["plugin"]["env"] == [{"name": "WITH_WORKLOAD", "value": "false"}]
    assert spec["driver"]["kernelModuleType"] == "open"
    assert spec["driver"]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "4", "memory": "6Gi"},
    }
