"""Multi-GPU pods (issue 37 item 4) admitted by a running Kyverno and placed by the real scheduler, on a pool with a
whole domain of two cards beside two time-sliced ones.

prod's only whole domain has one card, so on prod a pod asking for two GPUs can only be refused
(tests/e2e/test_kyverno_running.py proves that through `pulumi up`). Here the stack is prod with dc3's host given a
second card (`gpus:`, the same model at 0000:02:00) and a smaller VM (4 cores, 16 GiB): the whole domain now holds two
cards, and each time-sliced domain advertises four slots and more room, so the scheduler would rather put a GPU pod
there. Only the policies keep a two-GPU pod off them.

The Kyverno is the session's (`kyverno_running`): the chart and the admission and background controllers built from
e2e/kyverno's pinned module, v1.19.1. For it the stack renders, by `kyverno.policyApi`, the CEL types
(policies.kyverno.io/v1 MutatingPolicy and ValidatingPolicy; the default, Kyverno >= 1.17) or their ClusterPolicy
twins (kyverno.io/v1, which 1.19 still serves); each module run takes both. The offline preview's steering and
multi-GPU policy files are applied as `pulumi up` applies them (server-side apply, the provider's field manager,
conflicts forced), and so are the Nodes' labels (the preview's Node patches: the sharing profile label the whole-card
rule selects on). Each Node registers as RKE2's agent registers it, with the `nvidia.com/gpu` the real device plugin
advertises for its profile and card count (tests/e2e/plugin_capacity.py); KWOK runs the pods the scheduler binds.
Hostnames are this module's own: the engine tests register prod's later on the same control plane.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from components.gpu_platform.multi_gpu import WholeCards
from components.gpu_platform.steering_policy import whole_cards_expression
from offline.runner import PROJECT, read_stack_file
from tests.day2.k8s_objects import validated
from tests.e2e.control_plane import ControlPlane, eventually, node_ready, register_node
from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.kyverno_cases import IMAGE, gpu_expression
from tests.e2e.nodes import kubelet_report, rke2_registration
from tests.e2e.plugin_capacity import advertised
from tests.e2e.stacks import Previewed, run_preview

STACK = "e2e-multigpu"
WHOLE_DOMAIN = "dc3"
WORKLOAD_NAMESPACE = "e2e-multigpu-team"
GPU = "nvidia.com/gpu"
# What each policy API renders for the two pod policies, and how Kyverno says a policy of that kind is ready.
POLICY_KINDS = {"cel": {"MutatingPolicy", "ValidatingPolicy"}, "clusterpolicy": {"ClusterPolicy"}}
# Each workload pod's CPU and memory: enough that a 4-core, 16 GiB VM scores well below an 8-core, 32 GiB one.
POD_CPU, POD_MEMORY = "2", "4Gi"


def multigpu_config(policy_api: str) -> dict[str, Any]:
    """prod with dc3's host holding two cards on a smaller VM, hostnames of this module's own, and `policy_api`."""
    config = copy.deepcopy(read_stack_file("prod"))
    for domain in config[f"{PROJECT}:failureDomains"]:
        domain["hostname"] = f"{STACK}-{domain['name']}"
        if domain["name"] == WHOLE_DOMAIN:
            first = domain.pop("gpu")
            domain["gpus"] = [first, {**first, "pciAddress": "0000:02:00", "iommuGroup": 15}]
            domain |= {"cores": 4, "memoryMiB": 16384}
    key = f"{PROJECT}:kyverno"
    config[key] = {**config.get(key, {}), "policyApi": policy_api}
    return config


@dataclass(frozen=True)
class Pool:
    stack: Previewed
    kubectl: Kubectl
    policy_api: str
    hosts: dict[str, str]  # domain -> Node name

    @property
    def whole(self) -> WholeCards:
        return WholeCards.of(self.stack.config)

    @property
    def time_sliced_hosts(self) -> set[str]:
        return {host for domain, host in self.hosts.items() if domain != WHOLE_DOMAIN}


def manifest_documents(stack: Previewed) -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in stack.manifests() for doc in load_documents(path.read_text())]


def pod_policy_files(stack: Previewed) -> list[Path]:
    """The steering policy and the multi-GPU refusal, in whichever types the stack renders."""
    names = {stack.config.kyverno.policy_name, MULTI_GPU_POLICY_NAME}
    found = [
        (doc["kind"], path)
        for path, doc in manifest_documents(stack)
        if doc["kind"] in POLICY_KINDS["cel"] | POLICY_KINDS["clusterpolicy"] and doc["metadata"]["name"] in names
    ]
    assert len(found) == 2, found
    assert {kind for kind, _ in found} == POLICY_KINDS[stack.config.kyverno.policy_api], found
    return [path for _, path in found]


def policy_ready(kubectl: Kubectl, kind: str, name: str) -> bool:
    """Ready as Kyverno's status says: its webhooks are configured for the policy."""
    group = "kyverno.io" if kind == "ClusterPolicy" else "policies.kyverno.io"
    status = kubectl.json("get", f"{kind.lower().removesuffix('y')}ies.{group}", name).get("status") or {}
    if kind == "ClusterPolicy":
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
    return bool((status.get("conditionStatus") or {}).get("ready"))


def register_pool_nodes(kubectl: Kubectl, stack: Previewed) -> dict[str, str]:
    """Each domain's Node as RKE2 registers it, Ready, its labels as the stack's Node patch sets them, and the
    `nvidia.com/gpu` the device plugin advertises for its profile and cards."""
    cfg = stack.config
    (sharing,) = [
        doc
        for _, doc in manifest_documents(stack)
        if doc["kind"] == "ConfigMap" and "time-slicing" in doc["metadata"]["name"]
    ]
    hosts = {}
    for domain in cfg.failure_domains:
        labels, taints = rke2_registration(domain, cfg.rke2, stack.marking)
        register_node(kubectl, domain.hostname, labels, taints, kubelet_report(domain, cfg.rke2.version, "boot-1"))
        hosts[domain.name] = domain.hostname
    for path, doc in manifest_documents(stack):
        if doc["kind"] == "Node" and doc["metadata"]["name"] in hosts.values():
            done = kubectl.server_side_apply(path, dry_run=False)
            assert done.returncode == 0, done.stderr
    for domain in cfg.failure_domains:
        eventually(f"{domain.hostname} Ready", functools.partial(node_ready, kubectl, domain.hostname))
        slots = str(advertised(sharing["data"], domain.sharing, len(domain.cards)))
        status = {"status": {"capacity": {GPU: slots}, "allocatable": {GPU: slots}}}
        kubectl("patch", "node", domain.hostname, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    return hosts


@pytest.fixture(scope="module", params=["cel", "clusterpolicy"])
def pool(
    request: pytest.FixtureRequest, kyverno_running: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    policy_api: str = request.param
    stack = run_preview(STACK, multigpu_config(policy_api), tmp_path_factory.mktemp(f"multigpu-{policy_api}"))
    kubectl = kyverno_running.kubectl
    policies = pod_policy_files(stack)
    smoke = stack.config.smoke_test.namespace
    # Only the smoke Job's namespace: the engine tests' `up` creates prod's operator namespace later.
    smoke_namespace = [
        p for p, doc in manifest_documents(stack) if doc["kind"] == "Namespace" and doc["metadata"]["name"] == smoke
    ]
    hosts: dict[str, str] = {}
    try:
        hosts = register_pool_nodes(kubectl, stack)
        for path in [*smoke_namespace, *policies]:
            done = kubectl.server_side_apply(path, dry_run=False)
            assert done.returncode == 0, f"{path.name}: {done.stderr}"
        for path in policies:
            (doc,) = load_documents(path.read_text())
            kind, name = doc["kind"], doc["metadata"]["name"]
            eventually(f"{kind} {name} ready", functools.partial(policy_ready, kubectl, kind, name))
        kubectl.ensure_namespace(WORKLOAD_NAMESPACE)
        eventually(
            "the namespace's default ServiceAccount",
            lambda: kubectl.run("-n", WORKLOAD_NAMESPACE, "get", "sa", "default").returncode == 0,
        )
        yield Pool(stack, kubectl, policy_api, hosts)
    finally:
        for path in policies:
            kubectl.run("delete", "--ignore-not-found", "--wait=true", "-f", str(path))
        for namespace in (WORKLOAD_NAMESPACE, smoke):
            kubectl.run("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=120s")
        if hosts:
            kubectl.run("delete", "node", *hosts.values(), "--ignore-not-found", "--wait=true")


@pytest.fixture
def workloads(pool: Pool) -> Iterator[Pool]:
    """The pool, its workload namespace emptied after the test."""
    try:
        yield pool
    finally:
        pool.kubectl.run("-n", WORKLOAD_NAMESPACE, "delete", "pods", "--all", "--wait=true", "--timeout=60s")


def trainer(name: str, gpus: list[str], **spec: Any) -> dict[str, Any]:
    """A pod whose containers ask for these GPUs (limits; the API server defaults the requests from them), with
    POD_CPU and POD_MEMORY in all."""
    share = len(gpus)
    cpu, memory = f"{int(POD_CPU) * 1000 // share}m", f"{int(POD_MEMORY.removesuffix('Gi')) * 1024 // share}Mi"
    containers = [
        {
            "name": f"c{i}",
            "image": IMAGE,
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {GPU: count, "memory": memory}},
        }
        for i, count in enumerate(gpus)
    ]
    return validated(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": WORKLOAD_NAMESPACE},
            "spec": {"containers": containers, **spec},
        }
    )


def create(pool: Pool, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod created through the API server, as stored (after Kyverno's mutation)."""
    pool.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    stored: dict[str, Any] = pool.kubectl.json("-n", WORKLOAD_NAMESPACE, "get", "pod", pod["metadata"]["name"])
    return stored


def running_on(pool: Pool, name: str, namespace: str = WORKLOAD_NAMESPACE) -> str:
    """The Node the scheduler bound the pod to, once KWOK runs it."""

    def bound() -> str | None:
        pod = pool.kubectl.json("-n", namespace, "get", "pod", name)
        return pod["spec"].get("nodeName") if pod["status"].get("phase") in ("Running", "Succeeded") else None

    node: str = eventually(f"pod {namespace}/{name} running", bound)
    return node


def node_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms: list[dict[str, Any]] = affinity["nodeSelectorTerms"]
    return terms


def allocatable_gpus(pool: Pool, node: str) -> int:
    return int(pool.kubectl.json("get", "node", node)["status"]["allocatable"].get(GPU, "0"))


# --------------------------------------------------------------------------------------------------------


def test_each_time_sliced_node_advertises_more_gpus_than_the_whole_domain_and_the_whole_node_exactly_its_cards(
    pool: Pool,
) -> None:
    # The ground the tests below stand on: the scheduler alone would fit 2 or 3 GPUs on any time-sliced node.
    assert allocatable_gpus(pool, pool.hosts[WHOLE_DOMAIN]) == 2
    assert all(allocatable_gpus(pool, host) == 4 for host in pool.time_sliced_hosts)
    assert pool.whole.domains == ((WHOLE_DOMAIN, 2),)


def test_a_pod_asking_for_two_gpus_gets_the_whole_card_rule_and_runs_on_the_two_card_domain(workloads: Pool) -> None:
    stored = create(workloads, trainer("trainer-2-gpus", ["2"]))
    assert stored["spec"]["tolerations"][-1] == workloads.stack.marking.toleration
    assert node_terms(stored) == [
        {"matchExpressions": [gpu_expression(workloads.stack.marking), whole_cards_expression(workloads.whole)]}
    ]
    assert running_on(workloads, "trainer-2-gpus") == workloads.hosts[WHOLE_DOMAIN]


def test_two_gpus_over_two_containers_are_counted_together_and_steered_the_same(workloads: Pool) -> None:
    stored = create(workloads, trainer("trainer-1-and-1", ["1", "1"]))
    assert whole_cards_expression(workloads.whole) in node_terms(stored)[0]["matchExpressions"]
    assert running_on(workloads, "trainer-1-and-1") == workloads.hosts[WHOLE_DOMAIN]


def test_a_one_gpu_pod_of_the_same_shape_is_untouched_by_the_whole_card_rule_and_lands_on_a_time_sliced_node(
    workloads: Pool,
) -> None:
    # The control: what the scheduler does with this shape when only the GPU-node rule binds it. A time-sliced
    # node, because it has more room, is why the two-GPU pods above landing on dc3 is the policy's doing.
    stored = create(workloads, trainer("notebook-1-gpu", ["1"]))
    assert node_terms(stored) == [{"matchExpressions": [gpu_expression(workloads.stack.marking)]}]
    assert running_on(workloads, "notebook-1-gpu") in workloads.time_sliced_hosts


def test_without_the_policies_the_scheduler_puts_a_two_gpu_pod_on_a_time_sliced_node(pool: Pool) -> None:
    # The trap itself, on this pool: a pod Kyverno never sees (an excluded namespace) that tolerates the GPU taint
    # and requires a GPU node, as the steering policy would make it, gets two slices of one card.
    excluded = "kube-system"
    assert excluded in pool.stack.config.kyverno.excluded_namespaces
    pod = trainer(
        "unsteered-2-gpus",
        ["2"],
        tolerations=[pool.stack.marking.toleration],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [gpu_expression(pool.stack.marking)]}]
                }
            }
        },
    )
    pod["metadata"]["namespace"] = excluded
    try:
        pool.kubectl("create", "-f", "-", stdin=json.dumps(pod))
        assert running_on(pool, "unsteered-2-gpus", excluded) in pool.time_sliced_hosts
    finally:
        pool.kubectl.run("-n", excluded, "delete", "pod", "unsteered-2-gpus", "--ignore-not-found", "--wait=true")


def test_a_pod_asking_for_more_gpus_than_the_largest_whole_domain_is_refused_naming_the_count_and_the_domains(
    workloads: Pool,
) -> None:
    pod = trainer("trainer-3-gpus", ["2", "1"])
    done = workloads.kubectl.run("create", "-f", "-", stdin=json.dumps(pod))
    assert done.returncode != 0, done.stdout
    assert MULTI_GPU_POLICY_NAME in done.stderr
    assert f"asks for 3 {GPU}" in done.stderr
    assert f"the whole domains are {WHOLE_DOMAIN} (2 cards); ask for at most 2" in done.stderr
    assert workloads.kubectl.run("-n", WORKLOAD_NAMESPACE, "get", "pod", "trainer-3-gpus").returncode != 0


def test_a_two_gpu_pod_pinned_to_a_time_sliced_domain_is_admitted_but_never_scheduled_there(workloads: Pool) -> None:
    # nodeSelector is the pod's own and Kyverno leaves it alone; the required whole-card term it gains excludes
    # every node the selector allows, so the scheduler says so instead of handing out two slices of one card.
    zone = {"topology.kubernetes.io/zone": "dc1"}
    stored = create(workloads, trainer("pinned-2-gpus", ["2"], nodeSelector=zone))
    assert stored["spec"]["nodeSelector"] == zone
    assert whole_cards_expression(workloads.whole) in node_terms(stored)[0]["matchExpressions"]

    def unschedulable() -> dict[str, Any] | None:
        pod = workloads.kubectl.json("-n", WORKLOAD_NAMESPACE, "get", "pod", "pinned-2-gpus")
        conditions = pod["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None)

    condition = eventually("the scheduler's verdict on the pinned pod", unschedulable)
    assert condition["status"] == "False"
    assert "didn't match Pod's node affinity/selector" in condition["message"]
    pod = workloads.kubectl.json("-n", WORKLOAD_NAMESPACE, "get", "pod", "pinned-2-gpus")
    assert "nodeName" not in pod["spec"]


def test_the_two_card_domains_own_smoke_job_asking_for_both_cards_is_admitted_without_the_whole_card_rule(
    pool: Pool,
) -> None:
    # What failRequestsGreaterThanOne: false is for: the smoke Job of a multi-card domain asks for all its cards.
    kubectl, namespace = pool.kubectl, pool.stack.config.smoke_test.namespace
    jobs = [
        (path, doc)
        for path, doc in manifest_documents(pool.stack)
        if doc["kind"] == "Job" and doc["metadata"]["labels"].get("gpu-pool/domain") == WHOLE_DOMAIN
    ]
    assert len(jobs) == 2, [doc["metadata"]["name"] for _, doc in jobs]  # one per card
    path, job = jobs[0]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"][GPU] == "2"
    name = job["metadata"]["name"]
    try:
        done = kubectl.server_side_apply(path, dry_run=False)
        assert done.returncode == 0, done.stderr
        pod_name = eventually(
            "the Job's pod",
            lambda: [
                p["metadata"]["name"]
                for p in kubectl.json("-n", namespace, "get", "pods", "-l", f"job-name={name}")["items"]
            ],
        )[0]
        assert running_on(pool, pod_name, namespace) == pool.hosts[WHOLE_DOMAIN]
        pod = kubectl.json("-n", namespace, "get", "pod", pod_name)
        assert node_terms(pod) == [{"matchExpressions": [gpu_expression(pool.stack.marking)]}]
        assert pool.stack.marking.toleration in pod["spec"]["tolerations"]
    finally:
        kubectl.run("-n", namespace, "delete", "job", name, "--cascade=foreground", "--ignore-not-found", "--wait=true")
