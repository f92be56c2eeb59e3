"""GpuPlatform and its wiring to the domains, under Pulumi mocks."""

from __future__ import annotations

from collections.abc import Callable

import yaml

from offline.recording import Recording

Run = Callable[..., Recording]
P = "gpu-platform"


def test_operator_namespace_is_privileged_for_enforce_audit_and_warn(run_stack_program: Run, prod_config):
    namespace = run_stack_program(prod_config).named(f"{P}-namespace").inputs["metadata"]
    assert namespace["name"] == "gpu-operator"
    assert namespace["labels"] == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
    }


def test_the_release_waits_for_its_namespace_and_both_configmaps(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    release = recording.named(f"{P}-gpu-operator")
    for name in ("namespace", "time-slicing-config", "dcgm-metrics"):
        assert recording.urn_of(f"{P}-{name}") in release.dependencies, name
    for name in ("time-slicing-config", "dcgm-metrics"):
        assert recording.urn_of(f"{P}-namespace") in recording.named(f"{P}-{name}").dependencies


def test_release_is_the_pinned_chart_from_nvidia_with_the_configured_driver(run_stack_program: Run, prod_config):
    release = run_stack_program(prod_config).named(f"{P}-gpu-operator")
    assert release.type == "kubernetes:helm.sh/v3:Release"
    inputs = release.inputs
    assert (inputs["chart"], inputs["version"]) == ("gpu-operator", "v26.7.0")
    assert inputs["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert inputs["values"]["driver"]["version"] == "595.91.07"


def test_the_operator_wait_outlasts_a_slow_first_image_pull_instead_of_giving_up(run_stack_program: Run, prod_config):
    # The operator's and NFD's images are pulled on first install: minutes on a homelab uplink, not a fault.
    recording = run_stack_program(prod_config)
    assert int(recording.named(f"{P}-gpu-operator-ready").inputs["environment"]["TIMEOUT_SECONDS"]) >= 600
    assert recording.named(f"{P}-gpu-operator").inputs["timeout"] >= 600  # the chart's CRD-upgrade hook


def test_the_operator_reads_the_configmaps_the_platform_creates(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    values = recording.named(f"{P}-gpu-operator").inputs["values"]
    time_slicing = recording.named(f"{P}-time-slicing-config").inputs["metadata"]["name"]
    dcgm = recording.named(f"{P}-dcgm-metrics").inputs["metadata"]["name"]
    assert values["devicePlugin"]["config"]["name"] == time_slicing
    assert values["dcgmExporter"]["config"]["name"] == dcgm
    assert "dcgm-metrics.csv" in recording.named(f"{P}-dcgm-metrics").inputs["data"]


def test_every_domain_label_names_an_existing_time_slicing_profile(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    profiles = recording.named(f"{P}-time-slicing-config").inputs["data"]
    for name in ("dc1", "dc2", "dc3"):
        patch = recording.named(f"{name}-node-labels")
        assert patch.inputs["metadata"]["labels"]["nvidia.com/device-plugin.config"] in profiles
        assert recording.urn_of(f"{P}-time-slicing-config") in patch.dependencies


def test_time_slicing_profiles_advertise_four_slots_on_dc1_and_dc2_and_a_whole_card_on_dc3(
    run_stack_program: Run, prod_config
):
    data = run_stack_program(prod_config).named(f"{P}-time-slicing-config").inputs["data"]
    x4 = yaml.safe_load(data["a1000-x4"])
    assert x4["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert "sharing" not in yaml.safe_load(data["whole"])


def test_changing_one_domains_sharing_changes_only_that_nodes_label(run_stack_program: Run, prod_config, monitor):
    before = {r.name: r.inputs for r in run_stack_program(prod_config).by_type("kubernetes:core/v1:NodePatch")}
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][2]["sharing"] = "a1000-x4"
    after = {r.name: r.inputs for r in run_stack_program(prod_config).by_type("kubernetes:core/v1:NodePatch")}
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["dc3-node-labels"]


def test_the_steering_policy_does_not_wait_for_the_operator(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    policy = recording.named(f"{P}-gpu-steering-policy")
    assert (policy.inputs["apiVersion"], policy.inputs["kind"]) == ("policies.kyverno.io/v1", "MutatingPolicy")
    assert policy.inputs["metadata"]["name"] == "gpu-pods-to-gpu-nodes"
    assert recording.urn_of(f"{P}-gpu-operator") not in policy.dependencies


def test_no_platform_resource_waits_for_a_vm_so_platform_and_domains_deploy_in_parallel(
    run_stack_program: Run, prod_config
):
    recording = run_stack_program(prod_config)
    platform_urn = recording.urn_of(P)
    domain_urns = {r.urn for r in recording.registrations if r.name.startswith(("dc1", "dc2", "dc3"))}
    for registration in recording.registrations:
        if registration.parent == platform_urn:
            assert not set(registration.dependencies) & domain_urns, registration.name


def test_dashboard_and_alert_rules_are_registered_where_monitoring_looks(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    dashboard = recording.named(f"{P}-dashboard").inputs["metadata"]
    assert dashboard["namespace"] == "cattle-dashboards" and dashboard["labels"]["grafana_dashboard"] == "1"
    rule = recording.named(f"{P}-alert-rules").inputs
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "cattle-monitoring-system"


def test_monitoring_pieces_can_be_turned_off(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:monitoring"] = {"dashboardEnabled": False, "alertsEnabled": False}
    names = {r.name for r in run_stack_program(prod_config).registrations}
    assert f"{P}-dashboard" not in names and f"{P}-alert-rules" not in names


def test_explicit_quotas_and_the_generate_policy_for_labelled_namespaces(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    quota = recording.named(f"{P}-quota-katib-sweeps").inputs
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    policy = recording.named(f"{P}-gpu-quota-policy-kubeflow-profiles")
    assert policy.inputs["kind"] == "GeneratingPolicy"
    assert recording.urn_of(f"{P}-kyverno-quota-rbac") in policy.dependencies
    rbac = recording.named(f"{P}-kyverno-quota-rbac").inputs
    assert rbac["metadata"]["labels"]["rbac.kyverno.io/aggregate-to-background-controller"] == "true"


def test_a_quota_above_the_pool_is_a_warning_and_a_negative_one_an_error(run_stack_program: Run, prod_config, caplog):
    import pulumi
    import pytest

    prod_config["gpu-pool:gpuQuotas"] = {"namespaces": {"big": 50}}
    run_stack_program(prod_config)
    assert any("big" in record.getMessage() and "9" in record.getMessage() for record in caplog.records)
    prod_config["gpu-pool:gpuQuotas"] = {"namespaces": {"big": -1}}
    with pytest.raises(pulumi.RunError, match=r"gpu-pool:gpuQuotas\.namespaces\.big"):
        run_stack_program(prod_config)


def test_a_custom_gpu_label_and_taint_reach_nodes_policy_operator_and_smoke_test(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:kyverno"] = {
        "gpuNodeLabelKey": "accelerator",
        "gpuNodeLabelValue": "nvidia",
        "taintKey": "gpu.lab/dedicated",
        "taintValue": "yes",
    }
    recording = run_stack_program(prod_config)
    assert recording.named("dc1-node-labels").inputs["metadata"]["labels"]["accelerator"] == "nvidia"
    assert "gpu.lab/dedicated=yes:NoSchedule --overwrite" in recording.named("dc1-node-taint").inputs["create"]
    operator_tolerations = recording.named(f"{P}-gpu-operator").inputs["values"]["daemonsets"]["tolerations"]
    assert {"key": "gpu.lab/dedicated", "operator": "Exists", "effect": "NoSchedule"} in operator_tolerations
    policy = yaml.safe_dump(recording.named(f"{P}-gpu-steering-policy").inputs)
    assert "gpu.lab/dedicated" in policy and "accelerator" in policy


def _exporter_annotations(recording: Recording) -> dict[str, str]:
    values = recording.named("gpu-platform-gpu-operator").inputs["values"]
    return dict(values["dcgmExporter"]["annotations"])


def test_a_changed_metrics_list_changes_the_exporter_pod_annotation_so_running_exporters_roll(
    run_stack_program: Run, prod_config, monitor, monkeypatch
):
    # The operator mounts dcgm-metrics.csv with subPath, which never sees a ConfigMap edit: only a new pod
    # template (the annotation) makes the exporters read the new list.
    from components.gpu_platform import dcgm_metrics
    from knowledge.dcgm_fields import EXTRA_FIELDS, DcgmField

    recording = run_stack_program(prod_config)
    csv = recording.named("gpu-platform-dcgm-metrics").inputs["data"]["dcgm-metrics.csv"]
    before = _exporter_annotations(recording)
    assert before == {"gpu-pool/dcgm-metrics-sha256": dcgm_metrics.metrics_digest(csv)}
    monitor.recording.registrations.clear()
    extra = DcgmField("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation.")
    monkeypatch.setattr(dcgm_metrics, "EXTRA_FIELDS", (*EXTRA_FIELDS, extra))
    assert _exporter_annotations(run_stack_program(prod_config)) != before


def test_policy_api_clusterpolicy_gives_the_kyverno_1_13_to_1_16_clusterpolicies(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:kyverno"] = {"policyApi": "clusterpolicy", "minCpuPerGpu": "1"}
    recording = run_stack_program(prod_config)
    kinds = {
        name: recording.named(f"{P}-{name}").inputs["kind"]
        for name in ("gpu-steering-policy", "gpu-cpu-guard-policy", "gpu-quota-policy")
    }
    assert kinds == dict.fromkeys(kinds, "ClusterPolicy")
    assert recording.urn_of(f"{P}-kyverno-quota-rbac") in recording.named(f"{P}-gpu-quota-policy").dependencies


def test_the_cel_policies_are_the_three_kyverno_cel_types(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:kyverno"] = {"minCpuPerGpu": "1"}
    recording = run_stack_program(prod_config)
    kinds = {
        name: recording.named(f"{P}-{name}").inputs["kind"]
        for name in ("gpu-steering-policy", "gpu-cpu-guard-policy", "gpu-quota-policy-kubeflow-profiles")
    }
    assert kinds == {
        "gpu-steering-policy": "MutatingPolicy",
        "gpu-cpu-guard-policy": "ValidatingPolicy",
        "gpu-quota-policy-kubeflow-profiles": "GeneratingPolicy",
    }
