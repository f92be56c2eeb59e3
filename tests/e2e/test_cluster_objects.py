"""The cluster preflight's namespace and Prometheus queries, run as the program runs them (the same shell line,
the real kubectl) against a real kube-apiserver: present and missing namespaces told apart, the namespace labels a
ruleNamespaceSelector reads, and a Prometheus's ruleSelector read back from the server.

The Prometheus CRD is a stand-in (group, kind and plural of prometheus-operator's, any spec kept): its schema is
not in ../shared/upstream, and only the objects' selectors are read."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from components.gpu_platform.cluster_objects import (
    PROMETHEUSES,
    NeededNamespace,
    namespace_labels,
    namespace_problems,
    namespaces_query,
    parse_answer,
    query_command,
    rule_selector_problems,
)
from components.stack_check import validate_stack
from tests.e2e.kube import Kubectl
from tests.e2e.monitoring_crds import PROMETHEUS_CRD


def _prefix(kubectl: Kubectl) -> str:
    return f"{kubectl.binary} --kubeconfig {kubectl.kubeconfig} --cache-dir {kubectl.cache_dir}"


def _run(kubectl: Kubectl, query: str, what: str) -> list[Any]:
    done = subprocess.run(
        ["bash", "-c", query_command(_prefix(kubectl), query)], capture_output=True, text=True, timeout=60, check=True
    )
    return parse_answer(done.stdout, done.stderr, what)


def _config(prod_config: dict[str, Any], **monitoring: Any) -> Any:
    values = {k.split(":", 1)[1]: v for k, v in prod_config.items()}
    values["monitoring"] = {**values.get("monitoring", {}), "rulesNamespace": "e2e-monitoring", **monitoring}
    return validate_stack(values)


def test_present_and_missing_namespaces_are_told_apart_by_the_real_server(kubectl: Kubectl) -> None:
    kubectl.ensure_namespace("e2e-quota-present")
    needed = [
        NeededNamespace("e2e-quota-present", "gpu-pool:gpuQuotas.namespaces.e2e-quota-present", "its quota"),
        NeededNamespace("e2e-quota-absent", "gpu-pool:gpuQuotas.namespaces.e2e-quota-absent", "its quota"),
    ]

    existing = namespace_labels(_run(kubectl, namespaces_query(needed), "namespaces"))

    assert set(existing) == {"e2e-quota-present"}
    assert existing["e2e-quota-present"]["kubernetes.io/metadata.name"] == "e2e-quota-present"
    (problem,) = namespace_problems(needed, existing)
    assert problem.startswith("gpu-pool:gpuQuotas.namespaces.e2e-quota-absent: the cluster has no namespace")


def test_a_prometheus_selecting_another_release_is_read_back_and_named(kubectl: Kubectl, prod_config) -> None:
    kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(PROMETHEUS_CRD))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/prometheuses.monitoring.coreos.com")
    kubectl.ensure_namespace("e2e-monitoring")
    kps = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": "kps", "namespace": "e2e-monitoring"},
        "spec": {"ruleSelector": {"matchLabels": {"release": "kps"}}, "ruleNamespaceSelector": {}},
    }
    kubectl.create(kps, field_manager="e2e-setup")
    rules_namespace = [NeededNamespace("e2e-monitoring", "gpu-pool:monitoring.rulesNamespace", "the GPU alerts")]
    existing = namespace_labels(_run(kubectl, namespaces_query(rules_namespace), "namespaces"))
    prometheuses = _run(kubectl, PROMETHEUSES, "Prometheus objects")

    (problem,) = rule_selector_problems(_config(prod_config), prometheuses, existing)
    assert "e2e-monitoring/kps loads rules labelled {release: kps}: add them to ruleLabels" in problem
    assert rule_selector_problems(_config(prod_config, ruleLabels={"release": "kps"}), prometheuses, existing) == []


def test_kubectl_refusing_the_query_is_reported_in_its_own_words(kubectl: Kubectl) -> None:
    with pytest.raises(ValueError, match=r"could not list the cluster's widgets \(exit 1: .*widgets"):
        _run(kubectl, "get widgets.example.com -A -o json", "widgets")
