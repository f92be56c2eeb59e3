"""The cluster preflight: a feature whose CRD the cluster lacks is refused at preview, saying what to set."""

from __future__ import annotations

from collections.abc import Callable

import pulumi
import pytest

from components.gpu_platform.cluster_preflight import crd_check_command, crd_problems, needed_crds
from config.loader import validate_stack
from offline.recording import Recording
from offline.runner import install_mocks
from tests.proxmox_hardware import ALL_CRDS, answering, crd_listing

Run = Callable[..., Recording]


def test_prod_needs_the_servicemonitor_prometheusrule_and_kyverno_crds(prod_config):
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    assert [crd.name for crd in needed_crds(cfg)] == list(ALL_CRDS)
    command = crd_check_command("kubectl --context lab", needed_crds(cfg))
    assert command.startswith("kubectl --context lab get crd servicemonitors.monitoring.coreos.com")
    assert command.endswith("--ignore-not-found -o name 2>&1; echo kubectl-exit=$?")


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
        pulumi.RunError, match=r"preflight failed:\n  the cluster has no clusterpolicies.kyverno.io CRD"
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
