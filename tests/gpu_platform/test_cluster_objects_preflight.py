"""The cluster preflight's second half: a namespace the stack puts objects in but does not create, and GPU alerts
no Prometheus would load, are refused at preview (not found as a failed `up` or as alerts that never fire)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components.gpu_platform.cluster_objects import parse_answer, selects
from offline.recording import Recording
from offline.runner import install_mocks
from tests.day2.k8s_objects import validated
from tests.proxmox_hardware import (
    PROD_NAMESPACES,
    answering,
    cluster_namespaces,
    namespace,
    object_list,
    prometheus,
    prometheus_loading_every_rule,
)

Run = Callable[..., Recording]
# kube-prometheus-stack's default: ruleSelectorNilUsesHelmValues and serviceMonitorSelectorNilUsesHelmValues true
# render release: <release name> for both, and both namespace selectors empty (every namespace).
KPS = prometheus(
    "kps-prometheus",
    "monitoring",
    {"matchLabels": {"release": "kps"}},
    {},
    monitor_selector={"matchLabels": {"release": "kps"}},
    monitor_namespace_selector={},
)


def _refused(run: Run, config: dict[str, Any], **answers: Any) -> str:
    monitor = install_mocks("test", invoke=answering(**answers))
    with pytest.raises(pulumi.RunError) as raised:
        run(config)
    assert not [r for r in monitor.recording.registrations if not r.type.startswith("pulumi:providers:")]
    return str(raised.value)


def _preflight(run: Run, config: dict[str, Any], **answers: Any) -> str:
    monitor = install_mocks("test", invoke=answering(**answers))
    run(config)
    return str(monitor.recording.stack_outputs["clusterPreflight"])


def test_the_namespace_fixtures_are_valid_kubernetes_objects() -> None:
    for item in cluster_namespaces(PROD_NAMESPACES)["items"]:
        validated(item)


def test_a_quota_namespace_the_cluster_lacks_is_refused_with_the_command_that_creates_it(
    run_stack_program: Run, prod_config
) -> None:
    present = tuple(ns for ns in PROD_NAMESPACES if ns != "katib-sweeps")

    message = _refused(run_stack_program, prod_config, namespaces_stdout=cluster_namespaces(present))

    assert "gpu-pool:gpuQuotas.namespaces.katib-sweeps: the cluster has no namespace katib-sweeps" in message
    assert "kubectl create namespace katib-sweeps" in message


def test_rancher_monitorings_dashboard_namespace_on_a_cluster_without_it_is_refused(
    run_stack_program: Run, prod_config
) -> None:
    present = tuple(ns for ns in PROD_NAMESPACES if ns != "cattle-dashboards")

    message = _refused(run_stack_program, prod_config, namespaces_stdout=cluster_namespaces(present))

    assert "gpu-pool:monitoring.dashboardNamespace: the cluster has no namespace cattle-dashboards" in message


def test_alerts_kube_prometheus_stack_would_ignore_are_refused_naming_the_labels_it_wants(
    run_stack_program: Run, prod_config
) -> None:
    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([KPS]))

    assert "gpu-pool:monitoring.ruleLabels: no Prometheus in the cluster loads the GPU alerts" in message
    assert "monitoring/kps-prometheus loads rules labelled {release: kps}: add them to ruleLabels" in message


def test_with_the_release_label_kube_prometheus_stack_loads_them_and_the_preflight_says_so(
    run_stack_program: Run, prod_config
) -> None:
    prod_config["gpu-pool:monitoring"] = {
        **prod_config.get("gpu-pool:monitoring", {}),
        "ruleLabels": {"release": "kps"},
        "serviceMonitorLabels": {"release": "kps"},
    }

    outcome = _preflight(run_stack_program, prod_config, prometheuses_stdout=object_list([KPS]))

    assert outcome.startswith("passed: ") and "a Prometheus loads the GPU alerts" in outcome
    assert "a Prometheus scrapes the DCGM exporter" in outcome
    assert "namespaces cattle-dashboards, cattle-monitoring-system, katib-sweeps" in outcome


def test_a_prometheus_that_only_looks_in_its_own_namespace_gets_the_namespace_to_use(
    run_stack_program: Run, prod_config
) -> None:
    own_namespace_only = prometheus("prometheus", "monitoring", {})

    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([own_namespace_only]))

    assert "monitoring/prometheus does not look for rules in namespace cattle-monitoring-system" in message
    assert "set gpu-pool:monitoring.rulesNamespace to monitoring" in message


def test_a_dcgm_service_monitor_kube_prometheus_stack_would_not_scrape_is_refused_naming_the_labels_it_wants(
    run_stack_program: Run, prod_config
) -> None:
    prod_config["gpu-pool:monitoring"] = {"ruleLabels": {"release": "kps"}}

    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([KPS]))

    assert "gpu-pool:monitoring.serviceMonitorLabels: no Prometheus in the cluster selects the DCGM" in message
    assert "(in gpu-operator, labelled app=nvidia-dcgm-exporter)" in message
    assert "monitoring/kps-prometheus selects ServiceMonitors labelled {release: kps}" in message
    assert "ruleLabels" not in message.split("serviceMonitorLabels:", 1)[0]


def test_a_prometheus_without_a_service_monitor_selector_scrapes_nothing_and_says_so(
    run_stack_program: Run, prod_config
) -> None:
    rules_only = prometheus("rules-only", "cattle-monitoring-system", {}, {})

    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([rules_only]))

    assert "cattle-monitoring-system/rules-only has no serviceMonitorSelector (it selects no ServiceMonitor)" in message


def test_a_service_monitor_label_reaches_the_exporters_service_monitor_through_the_chart() -> None:
    from components.gpu_platform.release_values import release_values
    from config.stack import StackConfig
    from offline.runner import read_stack_file

    raw = {k.removeprefix("gpu-pool:"): v for k, v in read_stack_file("prod").items()}
    raw["monitoring"] = {"serviceMonitorLabels": {"release": "kps"}}
    cfg = StackConfig.model_validate(raw)

    values = release_values(cfg.gpu_operator, cfg.kyverno, cfg.monitoring)

    assert values["dcgmExporter"]["serviceMonitor"] == {"enabled": True, "additionalLabels": {"release": "kps"}}


def test_a_cluster_without_any_prometheus_is_refused_when_alerts_are_on(run_stack_program: Run, prod_config) -> None:
    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([]))

    assert "the cluster has no Prometheus object, so the GPU alerts would never be evaluated" in message


def test_alerts_and_service_monitor_off_ask_nothing_of_prometheus(run_stack_program: Run, prod_config) -> None:
    prod_config["gpu-pool:monitoring"] = {"alertsEnabled": False, "serviceMonitor": False}

    outcome = _preflight(run_stack_program, prod_config, prometheuses_stdout=object_list([]))

    assert outcome.startswith("passed: ") and "Prometheus" not in outcome


def test_a_service_monitor_on_a_cluster_without_any_prometheus_is_refused_even_with_alerts_off(
    run_stack_program: Run, prod_config
) -> None:
    prod_config["gpu-pool:monitoring"] = {"alertsEnabled": False}

    message = _refused(run_stack_program, prod_config, prometheuses_stdout=object_list([]))

    assert "gpu-pool:monitoring.serviceMonitor: the cluster has no Prometheus object" in message


def test_a_prometheus_loading_every_rule_passes(run_stack_program: Run, prod_config) -> None:
    everything = object_list([prometheus_loading_every_rule()])

    assert _preflight(run_stack_program, prod_config, prometheuses_stdout=everything).startswith("passed: ")


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ({}, {"a": "1"}, True),
        (None, {"a": "1"}, False),
        ({"matchLabels": {"release": "kps"}}, {"release": "kps", "x": "y"}, True),
        ({"matchExpressions": [{"key": "release", "operator": "In", "values": ["kps", "p"]}]}, {"release": "p"}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, {"team": "a"}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {}, True),
    ],
    ids=["empty matches all", "null matches none", "matchLabels", "In", "NotIn", "Exists", "DoesNotExist"],
)
def test_label_selectors_are_read_as_kubernetes_reads_them(selector: Any, labels: dict[str, str], selected: bool):
    assert selects(selector, labels) is selected


def test_kubectl_failing_to_list_is_reported_in_its_own_words() -> None:
    with pytest.raises(ValueError, match=r"could not list the cluster's namespaces \(exit 1: Unauthorized\)"):
        parse_answer("", "Unauthorized\nkubectl-exit=1\n", "namespaces")


def test_kubectls_answer_for_one_name_or_none_found_is_read_as_kubectl_prints_it() -> None:
    """`kubectl get namespaces a -o json` prints the Namespace itself; with --ignore-not-found and none, nothing."""
    one = cluster_namespaces(("katib-sweeps",))["items"][0]

    assert parse_answer(json.dumps(one), "kubectl-exit=0", "namespaces") == [one]
    assert parse_answer("", "kubectl-exit=0\n", "namespaces") == []


def test_an_explicit_quota_namespace_a_selector_also_matches_is_listed_as_information(
    run_stack_program: Run, prod_config
) -> None:
    # prod: katib-sweeps has an explicit quota of 2; labelled as a Kubeflow profile, the label rule also matches it.
    prod_config["gpu-pool:monitoring"] = {
        **prod_config.get("gpu-pool:monitoring", {}),
        "ruleLabels": {"release": "kps"},
        "serviceMonitorLabels": {"release": "kps"},
    }
    names = [name for name in PROD_NAMESPACES if name != "katib-sweeps"]
    listed = object_list(
        [
            *(namespace(name) for name in names),
            namespace("katib-sweeps", {"app.kubernetes.io/part-of": "kubeflow-profile"}),
        ]
    )

    outcome = _preflight(
        run_stack_program, prod_config, namespaces_stdout=listed, prometheuses_stdout=object_list([KPS])
    )

    assert outcome.startswith("passed: ")
    assert (
        "namespace katib-sweeps: its explicit gpuQuotas.namespaces entry (2 GPUs) wins over selector rule "
        "kubeflow-profiles" in outcome
    )


def test_an_explicit_quota_namespace_no_selector_matches_is_not_mentioned(run_stack_program: Run, prod_config) -> None:
    prod_config["gpu-pool:monitoring"] = {
        **prod_config.get("gpu-pool:monitoring", {}),
        "ruleLabels": {"release": "kps"},
        "serviceMonitorLabels": {"release": "kps"},
    }

    outcome = _preflight(run_stack_program, prod_config, prometheuses_stdout=object_list([KPS]))

    assert outcome.startswith("passed: ") and "wins over selector rule" not in outcome
