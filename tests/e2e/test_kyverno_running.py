"""A running Kyverno (admission and background controllers, v1.19.1) enforcing the policies `pulumi up` installed.

What it found: the ClusterPolicy variant's quota policy put back no deleted or edited quota (and, in
tests/e2e/test_kyverno_generate_existing.py, generated nothing for namespaces labelled before it), because Kyverno's
background controller checks the policy's matchConditions with a request of its own whose operation is empty
(components/gpu_platform/quota_policy.py says how the filter now admits it).

On the `deployed` stack (tests/e2e/engine_deployed.py), once with prod's CEL policies (MutatingPolicy,
GeneratingPolicy, ValidatingPolicy) and once with their ClusterPolicy twins (`kyverno.policyApi: clusterpolicy`),
each installed by a real `pulumi up` (the second `up` switches the stack, a last one switches it back). Kyverno
registered its own webhooks for them; the API server calls it; its background controller generates and syncs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from offline.runner import PROJECT
from tests.e2e.control_plane import eventually
from tests.e2e.engine_deployed import Deployed, rewrite_config
from tests.e2e.kube import Kubectl

QUOTA_NAMESPACE = "e2e-kubeflow-team"
WORKLOAD_NAMESPACE = "e2e-notebooks"


def policies_ready(kubectl: Kubectl, policy_api: str) -> bool:
    """Every gpu-pool policy Kyverno has: ready (webhooks configured) as its status says."""
    if policy_api == "cel":
        found = kubectl.json("get", "mutatingpolicies,generatingpolicies,validatingpolicies")["items"]
        return bool(found) and all((p.get("status") or {}).get("conditionStatus", {}).get("ready") for p in found)
    found = kubectl.json("get", "clusterpolicies.kyverno.io")["items"]
    return bool(found) and all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])
        for p in found
    )


@pytest.fixture(scope="module", params=["cel", "clusterpolicy"])
def policy_api(request: pytest.FixtureRequest, deployed: Deployed) -> Iterator[str]:
    api: str = request.param
    kubectl = deployed.plane.kubectl
    if api == "cel":
        eventually("the CEL policies ready", lambda: policies_ready(kubectl, api))
        yield api
        return
    key = f"{PROJECT}:kyverno"
    rewrite_config(
        deployed.stack, deployed.config_with(lambda c: c.__setitem__(key, {**c.get(key, {}), "policyApi": api}))
    )
    try:
        deployed.stack.up()
        eventually("the ClusterPolicies ready", lambda: policies_ready(kubectl, api))
        yield api
    finally:
        rewrite_config(deployed.stack, deployed.base)
        deployed.stack.up()


@pytest.fixture
def workload_namespace(deployed: Deployed) -> Iterator[str]:
    kubectl = deployed.plane.kubectl
    kubectl.ensure_namespace(WORKLOAD_NAMESPACE)
    eventually(
        "the namespace's default ServiceAccount",
        lambda: kubectl.run("-n", WORKLOAD_NAMESPACE, "get", "sa", "default").returncode == 0,
    )
    try:
        yield WORKLOAD_NAMESPACE
    finally:
        kubectl("delete", "namespace", WORKLOAD_NAMESPACE, "--wait=true", "--timeout=120s")


def test_a_gpu_pod_created_through_the_api_server_is_mutated_and_scheduled_onto_a_gpu_node(
    policy_api: str, deployed: Deployed, workload_namespace: str
) -> None:
    kubectl = deployed.plane.kubectl
    name = f"notebook-{policy_api}"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": workload_namespace},
        "spec": {
            "containers": [
                {
                    "name": "lab",
                    "image": "registry.example/notebook:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }
    kubectl("create", "-f", "-", stdin=json.dumps(pod))
    stored = kubectl.json("-n", workload_namespace, "get", "pod", name)
    gpu_hosts = {d["hostname"] for d in deployed.base[f"{PROJECT}:failureDomains"]}
    marking = deployed.cluster.marking
    assert marking.toleration in stored["spec"]["tolerations"], "Kyverno added the GPU toleration at admission"
    terms = stored["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"], "and the GPU node rule"
    running = eventually(
        "the pod scheduled and running",
        lambda: (
            (p := kubectl.json("-n", workload_namespace, "get", "pod", name))["status"].get("phase") == "Running" and p
        ),
    )
    assert running["spec"]["nodeName"] in gpu_hosts


def test_a_namespace_gaining_the_quota_label_gets_its_quota_kept_until_it_loses_the_label(
    policy_api: str, deployed: Deployed
) -> None:
    kubectl = deployed.plane.kubectl
    quotas = deployed.base[f"{PROJECT}:gpuQuotas"]
    (rule,) = quotas["selectors"]
    quota = f"{quotas.get('quotaName', 'gpu-quota')}-{rule['name']}"
    label = ",".join(f"{k}={v}" for k, v in rule["matchLabels"].items())
    unlabel = [f"{k}-" for k in rule["matchLabels"]]
    kubectl.ensure_namespace(QUOTA_NAMESPACE)

    def found() -> dict[str, Any] | None:
        done = kubectl.run("-n", QUOTA_NAMESPACE, "get", "resourcequota", quota, "-o", "json")
        return json.loads(done.stdout) if done.returncode == 0 else None

    try:
        assert found() is None
        kubectl("label", "namespace", QUOTA_NAMESPACE, *label.split(","))
        generated = eventually("the quota generated for the labelled namespace", found)
        assert generated["spec"]["hard"] == {"requests.nvidia.com/gpu": str(rule["maxGpus"])}
        kubectl("-n", QUOTA_NAMESPACE, "delete", "resourcequota", quota)
        restored = eventually(
            "the deleted quota restored",
            lambda: (q := found()) and q["metadata"]["uid"] != generated["metadata"]["uid"] and q,
        )
        assert restored["spec"]["hard"] == generated["spec"]["hard"]
        raised = json.dumps({"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}})
        kubectl("-n", QUOTA_NAMESPACE, "patch", "resourcequota", quota, "--type=merge", "-p", raised)
        eventually(
            "the edited quota reset to the rule's cap",
            lambda: (q := found()) and q["spec"]["hard"] == generated["spec"]["hard"],
        )
        kubectl("label", "namespace", QUOTA_NAMESPACE, *unlabel)
        eventually("the quota gone with the label", lambda: found() is None)
    finally:
        kubectl("delete", "namespace", QUOTA_NAMESPACE, "--wait=true", "--timeout=120s")


def gpu_pod(name: str, namespace: str, gpus_per_container: list[str], labels: dict[str, str] | None = None) -> Any:
    """A pod that Pod Security `restricted` admits (the smoke namespace enforces it), asking for GPUs per container."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": f"c{i}",
                    "image": "registry.example/trainer:1",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
                for i, gpus in enumerate(gpus_per_container)
            ],
        },
    }


def test_a_pod_asking_for_more_gpus_than_any_whole_domain_has_is_refused_by_the_api_server_naming_both(
    policy_api: str, deployed: Deployed, workload_namespace: str
) -> None:
    # prod's one whole domain, dc3, has one card: two GPUs in two containers is more than any honest placement.
    kubectl = deployed.plane.kubectl
    name = f"trainer-2-gpus-{policy_api}"
    done = kubectl.run("create", "-f", "-", stdin=json.dumps(gpu_pod(name, workload_namespace, ["1", "1"])))
    assert done.returncode != 0, done.stdout
    assert "asks for 2 nvidia.com/gpu" in done.stderr and "the whole domains are dc3 (1 card)" in done.stderr
    assert kubectl.run("-n", workload_namespace, "get", "pod", name).returncode != 0, "nothing was stored"


def test_a_smoke_job_pod_asking_for_several_gpus_is_admitted_without_the_whole_card_rule_and_only_it(
    policy_api: str, deployed: Deployed
) -> None:
    # Server-side dry run: every admission step (Kyverno's webhooks declare no side effects on dry run), nothing
    # stored in the namespace whose pods doctor reads.
    kubectl = deployed.plane.kubectl
    smoke = deployed.base.get(f"{PROJECT}:smokeTest", {}).get("namespace", "gpu-smoke-test")
    marking = deployed.cluster.marking
    label = {"app.kubernetes.io/name": "cuda-smoke-test"}

    def dry_run(pod: dict[str, Any]) -> Any:
        return kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod))

    admitted = dry_run(gpu_pod(f"smoke-2-gpus-{policy_api}", smoke, ["2"], label))
    assert admitted.returncode == 0, admitted.stderr
    stored = json.loads(admitted.stdout)
    terms = stored["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": marking.label_key, "operator": "In", "values": [marking.label_value]}]}
    ]
    # The namespace alone does not exempt a pod: without the smoke Job's label it is refused.
    unlabelled = dry_run(gpu_pod(f"not-smoke-2-gpus-{policy_api}", smoke, ["2"]))
    assert unlabelled.returncode != 0 and "asks for 2 nvidia.com/gpu" in unlabelled.stderr


def test_an_explicit_quota_namespace_labelled_for_a_rule_keeps_exactly_its_one_gpu_quota(
    policy_api: str, deployed: Deployed
) -> None:
    # Issue 37 item 5: an explicit gpuQuotas.namespaces entry wins; the generating policy skips it. A control
    # namespace labelled after it gets its generated quota: the background controller has been through both.
    kubectl = deployed.plane.kubectl
    quotas = deployed.base[f"{PROJECT}:gpuQuotas"]
    (explicit, *_) = sorted(quotas["namespaces"])
    (rule,) = quotas["selectors"]
    generated_name = f"{quotas.get('quotaName', 'gpu-quota')}-{rule['name']}"
    labels = [f"{k}={v}" for k, v in rule["matchLabels"].items()]
    unlabel = [f"{k}-" for k in rule["matchLabels"]]

    def gpu_quotas(namespace: str) -> list[str]:
        found = kubectl.json("-n", namespace, "get", "resourcequota")["items"]
        return sorted(q["metadata"]["name"] for q in found if "requests.nvidia.com/gpu" in q["spec"].get("hard", {}))

    before = gpu_quotas(explicit)
    assert len(before) == 1 and generated_name not in before, before
    kubectl.ensure_namespace(QUOTA_NAMESPACE)
    try:
        kubectl("label", "namespace", explicit, *labels, "--overwrite")
        kubectl("label", "namespace", QUOTA_NAMESPACE, *labels, "--overwrite")
        eventually("the control namespace's generated quota", lambda: gpu_quotas(QUOTA_NAMESPACE) == [generated_name])
        assert gpu_quotas(explicit) == before, "the rule generated a second GPU quota beside the explicit one"
    finally:
        kubectl("label", "namespace", explicit, *unlabel)
        kubectl("delete", "namespace", QUOTA_NAMESPACE, "--wait=true", "--timeout=120s")
