"""The plan never adopts an object the cluster already has without saying so: the cluster preflight reads every
object the platform creates, refuses one that someone else made (naming it, who made it and the ways out), and with
gpu-pool:kubernetes.adoptExisting adopts exactly those (the provider's upsert on) and says so.
The running Kyverno's version is read against the policy API the stack writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.gpu_platform.existing_objects import PlannedObject, planned_objects
from components.gpu_platform.kyverno_version import running_kyverno
from components.stack_check import validate_stack
from offline.recording import Recording
from offline.runner import install_mocks
from tests.chart_archive import package_chart
from tests.proxmox_hardware import answering, namespace

Run = Callable[..., Recording]
OPERATOR = "gpu-pool:gpuOperator"
KYVERNO = "gpu-pool:kyverno"
# Resources the platform creates by name that the preflight does not read: the Helm release (Helm's own records),
# patches of existing Nodes, and the smoke-test Jobs (their names carry a hash of their spec).
NOT_READ = ("kubernetes:helm.sh/v3:Release", "kubernetes:batch/v1:Job")


def _managed(obj: dict[str, Any], *managers: str) -> dict[str, Any]:
    fields = [{"manager": m, "operation": "Update", "apiVersion": "v1"} for m in managers]
    return {**obj, "metadata": {**obj["metadata"], "managedFields": fields}}


def _registered(recording: Recording) -> set[tuple[str, str | None, str]]:
    objects = set()
    for r in recording.registrations:
        if r.type.startswith("kubernetes:") and r.type not in NOT_READ and not r.type.endswith("Patch"):
            meta = r.inputs.get("metadata", {})
            objects.add((r.type.rsplit(":", 1)[1], meta.get("namespace"), meta["name"]))
    return objects


def _planned(config: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in config.items()})
    return {(o.kind, o.namespace, o.name) for o in planned_objects(cfg)}


def _run(run: Run, config: dict[str, Any], **answers: Any) -> Recording:
    monitor = install_mocks("test", invoke=answering(**answers))
    run(config)
    return monitor.recording


def _refused(run: Run, config: dict[str, Any], **answers: Any) -> str:
    monitor = install_mocks("test", invoke=answering(**answers))
    with pytest.raises(pulumi.RunError) as raised:
        run(config)
    assert not [r for r in monitor.recording.registrations if not r.type.startswith("pulumi:providers:")]
    return str(raised.value)


def _kubernetes_provider(recording: Recording) -> dict[str, Any]:
    (provider,) = recording.by_type("pulumi:providers:kubernetes")
    return provider.inputs


@pytest.mark.parametrize(
    "change",
    [
        {},
        {KYVERNO: {"policyApi": "clusterpolicy", "minCpuPerGpu": "1"}},
        {KYVERNO: {"minCpuPerGpu": "1"}, "gpu-pool:smokeTest": {"enabled": False}},
    ],
    ids=["prod", "clusterpolicies-and-cpu-guard", "cel-cpu-guard-no-smoke-test"],
)
def test_the_preflight_reads_every_object_the_platform_creates_by_name(
    run_stack_program: Run, prod_config, change: dict[str, Any]
) -> None:
    prod_config.update(change)

    assert _planned(prod_config) == _registered(run_stack_program(prod_config))


def test_with_the_chart_on_disk_the_preflight_reads_every_crd_the_plan_registers(
    run_stack_program: Run, prod_config, upstream: Path, tmp_path: Path
) -> None:
    chart = package_chart(upstream / "gpu-operator" / "v26.7.0" / "chart", "v26.7.0", tmp_path)
    prod_config[OPERATOR]["chart"] = str(chart)

    planned = _planned(prod_config)

    assert planned == _registered(run_stack_program(prod_config))
    assert ("CustomResourceDefinition", None, "clusterpolicies.nvidia.com") in planned


def test_kubectl_names_each_planned_object_by_its_plural_and_group() -> None:
    refs = {
        PlannedObject("v1", "Namespace", None, "gpu-operator", "k").ref,
        PlannedObject("policies.kyverno.io/v1", "MutatingPolicy", None, "p", "k").ref,
        PlannedObject("kyverno.io/v1", "ClusterPolicy", None, "p", "k").ref,
        PlannedObject("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "c", "k").ref,
    }

    assert refs == {
        "namespaces/gpu-operator",
        "mutatingpolicies.policies.kyverno.io/p",
        "clusterpolicies.kyverno.io/p",
        "customresourcedefinitions.apiextensions.k8s.io/c",
    }


def test_an_operator_namespace_helm_made_is_refused_naming_who_made_it_and_the_ways_out(
    run_stack_program: Run, prod_config
) -> None:
    existing = [_managed(namespace("gpu-operator"), "helm")]

    message = _refused(run_stack_program, prod_config, existing=existing)

    assert "gpu-pool:gpuOperator.namespace: the cluster already has Namespace gpu-operator (written by helm)" in message
    assert "kubectl delete namespaces/gpu-operator" in message
    assert "set gpu-pool:kubernetes.adoptExisting to true" in message


def test_every_foreign_object_is_named_in_the_one_refusal(run_stack_program: Run, prod_config) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "time-slicing-config", "namespace": "gpu-operator"},
    }
    existing = [_managed(namespace("gpu-operator"), "helm"), _managed(configmap, "kubectl-client-side-apply")]

    message = _refused(run_stack_program, prod_config, existing=existing)

    assert "Namespace gpu-operator (written by helm)" in message
    assert "ConfigMap time-slicing-config in namespace gpu-operator (written by kubectl-client-side-apply)" in message


def test_objects_pulumi_kubernetes_wrote_are_the_stacks_own_and_pass(run_stack_program: Run, prod_config) -> None:
    # After the first `up`: created with the field manager `pulumi-kubernetes`, applied as `pulumi-kubernetes-<id>`.
    existing = [
        _managed(namespace("gpu-operator"), "pulumi-kubernetes", "kube-controller-manager"),
        _managed(namespace("gpu-smoke-test"), "pulumi-kubernetes-4f1e2a7b"),
    ]

    recording = _run(run_stack_program, prod_config, existing=existing)

    assert "no object the plan creates is someone else's" in recording.stack_outputs["clusterPreflight"]
    assert _kubernetes_provider(recording)["upsertExistingObjects"] == "false"


def test_with_adopt_existing_the_plan_adopts_exactly_the_foreign_objects_and_says_so(
    run_stack_program: Run, prod_config
) -> None:
    prod_config["gpu-pool:kubernetes"] = {"adoptExisting": True}
    existing = [_managed(namespace("gpu-operator"), "helm")]

    recording = _run(run_stack_program, prod_config, existing=existing)

    said = recording.stack_outputs["clusterPreflight"]
    assert "adopting 1 existing object(s) the plan creates" in said
    assert "Namespace gpu-operator (written by helm)" in said
    assert _kubernetes_provider(recording)["upsertExistingObjects"] == "true"


def test_once_adopted_the_objects_are_the_stacks_and_the_provider_setting_does_not_change(
    run_stack_program: Run, prod_config
) -> None:
    # The next preview: the objects now carry pulumi-kubernetes' field manager. The provider's upsert stays as the
    # stack file says, so the preview shows no provider update after an adoption.
    prod_config["gpu-pool:kubernetes"] = {"adoptExisting": True}
    existing = [_managed(namespace("gpu-operator"), "helm", "pulumi-kubernetes-4f1e2a7b")]

    recording = _run(run_stack_program, prod_config, existing=existing)

    assert "no object the plan creates is someone else's" in recording.stack_outputs["clusterPreflight"]
    assert _kubernetes_provider(recording)["upsertExistingObjects"] == "true"


def _kyverno_deployment(image: str) -> dict[str, Any]:
    """The admission controller as the kyverno chart renders it (v1.19.0 templates/admission-controller)."""
    labels = {
        "app.kubernetes.io/component": "admission-controller",
        "app.kubernetes.io/instance": "kyverno",
        "app.kubernetes.io/part-of": "kyverno",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kyverno-admission-controller", "namespace": "kyverno", "labels": labels},
        "spec": {"template": {"spec": {"containers": [{"name": "kyverno", "image": image}]}}},
    }


def test_clusterpolicies_on_a_live_kyverno_1_20_are_refused_with_the_fix(run_stack_program: Run, prod_config) -> None:
    prod_config[KYVERNO] = {"policyApi": "clusterpolicy"}

    message = _refused(
        run_stack_program, prod_config, deployments=[_kyverno_deployment("reg.kyverno.io/kyverno/kyverno:v1.20.0")]
    )

    assert (
        "gpu-pool:kyverno.policyApi: the cluster runs Kyverno 1.20.0 (kyverno/kyverno-admission-controller)" in message
    )
    assert "set gpu-pool:kyverno.policyApi: cel" in message


def test_clusterpolicies_on_kyverno_1_19_pass(run_stack_program: Run, prod_config) -> None:
    prod_config[KYVERNO] = {"policyApi": "clusterpolicy"}

    _run(run_stack_program, prod_config, deployments=[_kyverno_deployment("reg.kyverno.io/kyverno/kyverno:v1.19.1")])


def test_cel_policies_on_a_kyverno_older_than_1_17_are_refused(run_stack_program: Run, prod_config) -> None:
    message = _refused(
        run_stack_program, prod_config, deployments=[_kyverno_deployment("ghcr.io/kyverno/kyverno:v1.16.2")]
    )

    assert "the cluster runs Kyverno 1.16.2" in message
    assert "set gpu-pool:kyverno.policyApi: clusterpolicy" in message


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("reg.kyverno.io/kyverno/kyverno:v1.20.1", (1, 20, 1)),
        ("ghcr.io/kyverno/kyverno:v1.19.1@sha256:" + "0" * 64, (1, 19, 1)),
        ("registry.local:5000/kyverno/kyverno:v1.21.0-rc.1", (1, 21, 0)),
        ("reg.kyverno.io/kyverno/kyverno@sha256:" + "0" * 64, None),
        ("reg.kyverno.io/kyverno/kyvernopre:v1.20.0", None),
        ("example.com/other/admission:v2.0.0", None),
    ],
)
def test_the_kyverno_version_is_read_from_a_released_image_tag_only(
    image: str, version: tuple[int, ...] | None
) -> None:
    found = running_kyverno([_kyverno_deployment(image)])

    assert found == ([("kyverno/kyverno-admission-controller", version)] if version else [])
