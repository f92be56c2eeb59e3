"""The cluster preflight: a feature whose CRD the cluster lacks is refused at preview, saying what to set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components.gpu_platform.cluster_preflight import crd_check_command, crd_problems, needed_crds
from components.stack_check import validate_stack
from config.stack import StackConfig
from offline.recording import Recording
from offline.runner import install_mocks
from tests.chart_archive import package_chart
from tests.proxmox_hardware import ALL_CRDS, answering, crd_listing

Run = Callable[..., Recording]


def test_prod_needs_the_servicemonitor_prometheusrule_and_kyverno_crds(prod_config):
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    assert [crd.name for crd in needed_crds(cfg)] == list(ALL_CRDS)
    command = crd_check_command("kubectl --context lab", needed_crds(cfg))
    assert command.startswith("kubectl --context lab get crd servicemonitors.monitoring.coreos.com")
    assert command.endswith(".status.storedVersions[*]' 2>&1; echo kubectl-exit=$?")


def test_a_service_monitor_on_a_cluster_without_its_crd_is_refused_with_what_to_set(prod_config):
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    present = tuple(crd for crd in ALL_CRDS if not crd.startswith("servicemonitors"))
    (problem,) = crd_problems(needed_crds(cfg), crd_listing(present))
    assert "no servicemonitors.monitoring.coreos.com CRD" in problem
    assert "gpu-pool:monitoring.serviceMonitor is true" in problem
    assert "set gpu-pool:monitoring.serviceMonitor and alertsEnabled to false" in problem


def test_the_preview_stops_before_anything_is_registered_when_a_crd_is_missing(
    monkeypatch, prod_config, run_stack_program: Run
):
    monitor = install_mocks("test", invoke=answering(crd_stdout=crd_listing(ALL_CRDS[:2])))
    with pytest.raises(
        pulumi.RunError, match=r"preflight failed:\n  the cluster has no mutatingpolicies.policies.kyverno.io CRD"
    ):
        run_stack_program(prod_config)
    assert not [r for r in monitor.recording.registrations if not r.type.startswith("pulumi:providers:")]


def test_a_cluster_kubectl_cannot_reach_is_reported_with_kubectls_own_words(prod_config):
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    output = "The connection to the server 10.0.0.1:6443 was refused\nkubectl-exit=1\n"
    (problem,) = crd_problems(needed_crds(cfg), output)
    assert problem.startswith("gpu-pool:kubernetes: kubectl could not list the cluster's CRDs (exit 1: The connection")
    assert "gpu-pool:preflight.clusterCheck" in problem


def test_a_stack_without_monitoring_or_kyverno_needs_no_crd(prod_config):
    prod_config["gpu-pool:monitoring"] = {"serviceMonitor": False, "alertsEnabled": False}
    prod_config["gpu-pool:kyverno"] = {"enabled": False}
    prod_config["gpu-pool:gpuQuotas"] = {"namespaces": {"katib-sweeps": 2}}
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    assert needed_crds(cfg) == []


def test_the_check_can_be_turned_off_and_says_so(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:preflight"] = {"clusterCheck": False}
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["clusterPreflight"] == "skipped: gpu-pool:preflight.clusterCheck is false"
    assert not [i for i in monitor.recording.invocations if "get crd" in str(i.args)]


def test_a_proxmox_provider_without_an_ssh_agent_is_refused_before_up_would_fail_uploading_snippets(
    run_stack_program: Run, prod_config, monitor, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(pulumi.RunError, match=r"gpu-pool:proxmox.ssh.agent: .*SSH_AUTH_SOCK is not set"):
        run_stack_program(prod_config)
    assert monitor.recording.registrations == []


def cfg_of(config: dict[str, Any]) -> StackConfig:
    return validate_stack({k.split(":", 1)[1]: v for k, v in config.items()})


def test_cel_policies_on_a_kyverno_without_the_cel_types_are_refused_naming_policy_api_clusterpolicy(prod_config):
    # Kyverno 1.16: ClusterPolicy only.
    present = (
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
        "clusterpolicies.kyverno.io",
    )
    problems = crd_problems(needed_crds(cfg_of(prod_config)), crd_listing(present))
    # The steering MutatingPolicy, the quota GeneratingPolicy and the multi-GPU refusal ValidatingPolicy.
    assert len(problems) == 3 and "no mutatingpolicies.policies.kyverno.io CRD" in problems[0]
    assert (
        "no validatingpolicies.policies.kyverno.io CRD, but gpu-pool:kyverno.enabled is true (the multi-GPU"
        in (problems[2])
    )
    assert "set gpu-pool:kyverno.policyApi: clusterpolicy" in problems[0]


def test_cel_types_served_only_below_v1_are_refused_with_the_version_the_stack_writes(prod_config):
    older = {crd: ("v1alpha1", "v1alpha1") for crd in ALL_CRDS if "kyverno" in crd}
    problems = crd_problems(needed_crds(cfg_of(prod_config)), crd_listing(versions=older))
    assert problems and all("serves v1alpha1, not v1" in p for p in problems)


def test_clusterpolicy_api_needs_the_clusterpolicy_crd_and_says_kyverno_1_20_has_none(prod_config):
    prod_config["gpu-pool:kyverno"] = {"policyApi": "clusterpolicy"}
    (problem,) = crd_problems(needed_crds(cfg_of(prod_config)), crd_listing(ALL_CRDS[:2]))
    assert (
        "no clusterpolicies.kyverno.io CRD" in problem
        and "policyApi: cel (Kyverno 1.20 has no ClusterPolicy)" in problem
    )


def test_a_chart_older_than_the_clusters_operator_crds_is_refused_as_a_downgrade(prod_config, upstream, tmp_path):
    archive = package_chart(upstream / "gpu-operator" / "v26.7.0" / "chart", "v26.7.0", tmp_path)
    prod_config["gpu-pool:gpuOperator"]["chart"] = str(archive)
    needed = needed_crds(cfg_of(prod_config))
    assert {c.name for c in needed if not c.required} >= {"clusterpolicies.nvidia.com", "gpuclusters.nvidia.com"}
    newer = {"clusterpolicies.nvidia.com": ("v1,v2", "v1,v2")}
    (problem,) = crd_problems(needed, crd_listing((*ALL_CRDS, "clusterpolicies.nvidia.com"), versions=newer))
    assert "clusterpolicies.nvidia.com CRD has objects stored as v2" in problem
    assert "pin a chartVersion at least as new as the cluster's operator" in problem
    # The chart's own CRDs missing from the cluster are fine: the program creates them.
    assert crd_problems(needed, crd_listing()) == []


def test_no_preflight_prints_what_it_reads_into_the_engines_output(prod_config, run_stack_program: Run):
    # The real engine showed every `kubectl get ... -o json` the preflights read, hundreds of lines per preview:
    # pulumi-command logs an invoke's output unless `logging` is none.
    prod_config["gpu-pool:preflight"] = {"hostCheck": True}
    recording = run_stack_program(prod_config)
    runs = [call for call in recording.invocations if call.token == "command:local:run"]
    assert len(runs) >= 4, [call.args.get("command") for call in runs]
    assert {call.args.get("logging") for call in runs} == {"none"}


def test_the_charts_nfd_turned_off_on_a_cluster_without_nfd_is_refused(run_stack_program, prod_config, monitor):
    from offline.runner import install_mocks
    from tests.proxmox_hardware import answering, crd_listing

    prod_config["gpu-pool:gpuOperator"]["extraValues"] = {"nfd": {"enabled": False}}
    install_mocks("test", invoke=answering(crd_stdout=crd_listing()))

    with pytest.raises(pulumi.RunError) as raised:
        run_stack_program(prod_config)

    assert "the cluster has no nodefeatures.nfd.k8s-sigs.io CRD" in str(raised.value)
    assert "install Node Feature Discovery, or remove nfd.enabled: false" in str(raised.value)
