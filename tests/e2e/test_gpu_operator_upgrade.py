"""The operator upgrade v26.3.2 -> v26.7.0 on a real kube-apiserver: the CRDs as the program now manages them.

A cluster of its own (etcd + kube-apiserver + kubectl only), so the session cluster's v26.3.2 CRDs stay as other
tests expect them. Three questions, answered by the server itself:
- Adoption: CRDs Helm installed (a plain create, field manager "helm", an Update in managedFields) taken over by
  server-side apply with the program's field manager: is the CRD kept (same uid, objects still there) or
  re-created, and does the server refuse it without forcing?
- Upgrade: the v26.3.2 CRDs and a ClusterPolicy carrying every value the stack sets, then the v26.7.0 CRDs applied
  as the program applies them: is every field the stack set still stored, and is the object still valid?
- Order: the five v26.7.0 CRDs are served before anything of the new release would need them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.cluster_preflight import crd_check_command, crd_problems, needed_crds
from components.gpu_platform.operator_crds import build_operator_crds
from components.gpu_platform.operator_values import build_gpu_operator_values
from components.stack_check import validate_stack
from config.chart_source import read_local_chart
from config.gpu_operator import GpuOperatorConfig
from offline.runner import read_stack_file
from tests.chart_archive import package_chart
from tests.e2e.conftest import DEFAULT_BIN, TOOLS_ENV, kubectl_for, reported_cluster
from tests.e2e.kube import PULUMI_FIELD_MANAGER, Kubectl
from tests.e2e.servers import Tools

OLD, NEW = "v26.3.2", "v26.7.0"
# The field manager Helm's own create leaves on what it installed (helm pkg/kube client: "helm").
HELM_FIELD_MANAGER = "helm"


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:

    tools = Tools(Path(os.environ.get(TOOLS_ENV) or DEFAULT_BIN))
    missing = [p.name for p in (tools.etcd, tools.kube_apiserver, tools.kubectl) if not p.is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not built in {tools.bin_dir}: run `make e2e-tools`")
    with reported_cluster(tools, tmp_path_factory.mktemp("upgrade")) as cluster:
        yield kubectl_for(tools, cluster)


def crds(upstream: Path, version: str) -> list[dict[str, Any]]:
    return build_operator_crds(read_local_chart(upstream / "gpu-operator" / version / "chart"), nfd_enabled=True)


def clusterpolicy(version: str) -> dict[str, Any]:
    """A ClusterPolicy with every value the stack sets that the chart copies into it (the sections the CRD has)."""
    cfg = GpuOperatorConfig.model_validate({"chartVersion": version, "driverVersion": "580.173.02"})
    values = build_gpu_operator_values(
        cfg,
        time_slicing_configmap="time-slicing-config",
        default_profile=None,
        dcgm_metrics_configmap="dcgm-custom-metrics",
        dcgm_metrics_digest="0123456789abcdef",
        service_monitor=True,
    )
    spec = {k: v for k, v in values.items() if k not in ("node-feature-discovery", "operator", "psa", "nfd")}
    # The sections every ClusterPolicy must carry (the chart always renders them).
    spec["operator"] = {"runtimeClass": values["operator"]["runtimeClass"]}
    spec |= {"gfd": {}, "nodeStatusExporter": {}}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


def apply(kubectl: Kubectl, obj: dict[str, Any], *, force: bool) -> str:
    args = ["apply", "--server-side", "--field-manager", PULUMI_FIELD_MANAGER, "-f", "-"]
    done = kubectl.run(*args, *(["--force-conflicts"] if force else []), stdin=json.dumps(obj))
    return "" if done.returncode == 0 else done.stderr


def uid(kubectl: Kubectl, name: str) -> str:
    return str(kubectl.json("get", "crd", name)["metadata"]["uid"])


def established(kubectl: Kubectl, name: str) -> None:
    """Until the server serves the CRD (its Established condition; right after a create it has no status yet)."""
    deadline = time.monotonic() + 60

    def conditions() -> list[dict[str, Any]]:
        return list(kubectl.json("get", "crd", name).get("status", {}).get("conditions") or [])

    while not any(c["type"] == "Established" and c["status"] == "True" for c in conditions()):
        assert time.monotonic() < deadline, f"CRD {name} not established within 60 s"
        time.sleep(0.2)


def leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        found: dict[str, Any] = {}
        for key, value in tree.items():
            found |= leaves(value, f"{prefix}.{key}" if prefix else key)
        return found
    return {prefix: tree}


def test_helm_installed_crds_are_adopted_and_upgraded_in_place_and_the_stacks_clusterpolicy_loses_nothing(
    kubectl: Kubectl, upstream: Path
) -> None:
    # As Helm installed them with the v26.3.2 chart (crds/ created once, never upgraded).
    for crd in crds(upstream, OLD):
        kubectl.create(crd, field_manager=HELM_FIELD_MANAGER)
        established(kubectl, crd["metadata"]["name"])
    before = {crd["metadata"]["name"]: uid(kubectl, crd["metadata"]["name"]) for crd in crds(upstream, OLD)}
    # Chart values the chart's template maps elsewhere (devicePlugin.config.create, ...) are no ClusterPolicy
    # fields: the server drops them (fieldValidation Ignore) and what it stores is what the stack's object holds.
    kubectl(
        "create",
        "--validate=false",
        "--field-manager",
        HELM_FIELD_MANAGER,
        "-f",
        "-",
        stdin=json.dumps(clusterpolicy(OLD)),
    )
    policy = kubectl.json("get", "clusterpolicy", "cluster-policy")
    assert policy["spec"]["driver"]["version"] == "580.173.02" and policy["spec"]["cdi"]["enabled"] is True

    # Adoption at the same version: the program's apply of the identical CRDs shares ownership, no force needed.
    for crd in crds(upstream, OLD):
        assert apply(kubectl, crd, force=False) == "", crd["metadata"]["name"]

    # The bump: the same apply of the v26.7.0 CRDs conflicts with what Helm's create owns...
    clusterpolicies = next(c for c in crds(upstream, NEW) if c["metadata"]["name"] == "clusterpolicies.nvidia.com")
    refused = apply(kubectl, clusterpolicies, force=False)
    assert "conflict" in refused.lower() and HELM_FIELD_MANAGER in refused, refused
    # ...so the CRD resources force it (pulumi.com/patchForce, which the builder sets), as the hook did before.
    assert all(c["metadata"]["annotations"]["pulumi.com/patchForce"] == "true" for c in crds(upstream, NEW))
    for crd in crds(upstream, NEW):
        assert apply(kubectl, crd, force=True) == "", crd["metadata"]["name"]
        established(kubectl, crd["metadata"]["name"])

    # Nothing was deleted or re-created: a re-created CRD would have taken every ClusterPolicy with it.
    assert {name: uid(kubectl, name) for name in before} == before
    served = {c["metadata"]["name"] for c in kubectl.json("get", "crd")["items"]}
    assert {c["metadata"]["name"] for c in crds(upstream, NEW)} <= served

    # The stack's ClusterPolicy is still there with every field it set, and valid under the new schema.
    stored = kubectl.json("get", "clusterpolicy", "cluster-policy")
    missing = {
        path: value for path, value in leaves(policy["spec"]).items() if leaves(stored["spec"]).get(path) != value
    }
    assert missing == {}, f"fields pruned or changed by the v26.7.0 schema: {missing}"
    kubectl("replace", "--dry-run=server", "-f", "-", stdin=json.dumps(stored))


def test_the_preflight_reads_served_and_stored_versions_from_the_real_server_and_refuses_a_downgrade(
    kubectl: Kubectl, upstream: Path, tmp_path: Path
) -> None:
    """The preflight's own kubectl command (custom columns with a JSONPath filter) against the real server, with
    the Kyverno CEL CRDs and the v26.7.0 operator CRDs installed."""
    for crd in crds(upstream, NEW):
        assert apply(kubectl, crd, force=True) == "", crd["metadata"]["name"]
        established(kubectl, crd["metadata"]["name"])
    for name in ("generatingpolicies", "mutatingpolicies", "validatingpolicies"):
        crd = yaml.safe_load((upstream / "kyverno" / "v1.19.0" / f"policies.kyverno.io_{name}.yaml").read_text())
        done = kubectl.run("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(crd))
        assert done.returncode == 0, done.stderr
        established(kubectl, f"{name}.policies.kyverno.io")
    cfg = GpuOperatorConfig.model_validate(
        {"chartVersion": NEW, "chart": str(package_chart(upstream / "gpu-operator" / NEW / "chart", NEW, tmp_path))}
    )
    stack = validate_stack(
        {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
        | {
            "gpuOperator": {"chartVersion": NEW, "chart": cfg.chart},
            "monitoring": {"serviceMonitor": False, "alertsEnabled": False},
            "kyverno": {"minCpuPerGpu": "1"},
        }
    )
    needed = needed_crds(stack)
    command = crd_check_command(f"{kubectl.binary} --kubeconfig {kubectl.kubeconfig}", needed)
    output = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False).stdout
    assert "clusterpolicies.nvidia.com" in output and "mutatingpolicies.policies.kyverno.io" in output, output
    assert crd_problems(needed, output) == [], output
    # A cluster that served only v1alpha1 of the CEL types would be refused (the real listing, edited).
    assert crd_problems([c for c in needed if c.served], output.replace("v1,v1alpha1,v1beta1", "v1alpha1")) != []
