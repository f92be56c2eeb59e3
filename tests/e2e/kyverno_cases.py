"""Objects, and one `kyverno apply` per stack and question, shared by the Kyverno e2e tests (test_kyverno_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.gpu_platform.cpu_guard_policy import POLICY_NAME as CPU_GUARD_POLICY_NAME
from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from components.gpu_platform.multi_gpu import STEERING_RULE_NAME as WHOLE_CARDS_RULE
from components.gpu_platform.multi_gpu import WholeCards, smoke_label
from components.gpu_platform.quota_policy import QUOTA_POLICY_NAME
from components.shared.node_marking import GpuNodeMarking
from config.gpu_quotas import NamespaceQuotaRule
from tests.day2.k8s_objects import validated
from tests.e2e.kube import load_documents
from tests.e2e.kyverno_cli import Applied, Kyverno, rules_only
from tests.e2e.stacks import Previewed

IMAGE = "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04"
# A Kubeflow profile namespace: not excluded by any stack.
USER_NAMESPACE = "team-a"
# The steering policy's rules, in order (components/gpu_platform/steering_policy.py).
NEW_TOLERATIONS = "tolerate-gpu-taint-new-list"
APPEND_TOLERATION = "tolerate-gpu-taint"
NEW_AFFINITY = "require-gpu-node-new-affinity"
NEW_NODE_AFFINITY = "require-gpu-node-new-node-affinity"
NEW_REQUIRED = "require-gpu-node-new-required-terms"
EMPTY_REQUIRED = "require-gpu-node-empty-required-terms"
EVERY_TERM = "require-gpu-node-in-every-term"
STEERING_RULES = [NEW_TOLERATIONS, APPEND_TOLERATION, NEW_AFFINITY, NEW_NODE_AFFINITY, NEW_REQUIRED, EMPTY_REQUIRED]
STEERING_RULES += [EVERY_TERM]
# Pods that hold more than one GPU while running (issue 37 item 4), and the smoke Job's pod that asks for several but
# is exempt; the rest hold one (or none).
SEVERAL_GPUS = (
    "gpu-limit-number",
    "gpu-two-containers",
    "gpu-sidecar-and-app",
    "gpu-several-own-terms",
    "smoke-namespace-unlabelled-two-gpus",
)
SMOKE_EXEMPT = "smoke-job-two-gpus"
# Pods that ask for no GPU: the steering policy must never touch them.
NO_GPU = ("gpu-limit-zero", "no-gpu")

Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------------------
# Objects
# --------------------------------------------------------------------------------------------------------


def container(name: str = "main", *, gpu: str | int | None = None, resource: str = "nvidia.com/gpu") -> Obj:
    spec: Obj = {"name": name, "image": IMAGE}
    if gpu is not None:
        spec["resources"] = {"limits": {resource: gpu}}
    return spec


def pod(
    name: str, *containers: Obj, namespace: str = USER_NAMESPACE, init: list[Obj] | None = None, **spec: Any
) -> Obj:
    body: Obj = {"containers": list(containers), **spec}
    if init is not None:
        body["initContainers"] = init
    return validated(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": body}
    )


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    metadata: Obj = {"name": name}
    if labels is not None:
        metadata["labels"] = labels
    return validated({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})


def required(*terms: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def zone(value: str) -> Obj:
    return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [value]}


def gpu_expression(marking: GpuNodeMarking) -> Obj:
    return {"key": marking.label_key, "operator": "In", "values": [marking.label_value]}


def excluded_namespaces(stack: Previewed) -> list[str]:
    """The namespaces the stack's pod policies leave alone (the config's, plus the operator's own)."""
    return sorted({*stack.config.kyverno.excluded_namespaces, stack.config.gpu_operator.namespace})


def whole_cards(stack: Previewed) -> WholeCards:
    return WholeCards.of(stack.config)


def steering_rules(stack: Previewed) -> list[str]:
    """The steering ClusterPolicy's rules, in order: the multi-GPU one only where the stack has a whole domain."""
    return STEERING_RULES + ([WHOLE_CARDS_RULE] if whole_cards(stack).profiles else [])


def labelled(body: Obj, labels: dict[str, str]) -> Obj:
    return validated({**body, "metadata": {**body["metadata"], "labels": labels}})


def steering_pods(stack: Previewed) -> dict[str, Obj]:
    """The shapes of test_steering_policy_semantics.py, for this stack's label, taint and GPU resource, plus one GPU
    pod in each namespace the stack excludes."""
    marking, resource = stack.marking, stack.config.kyverno.gpu_resource

    def gpu(name: str = "main", count: str | int = "1") -> Obj:
        return container(name, gpu=count, resource=resource)

    same = marking.toleration
    hostname = "kubernetes.io/hostname"
    smoke = stack.config.smoke_test.namespace
    pods = [
        pod("gpu-plain", gpu()),
        pod("gpu-init-only", container(), init=[gpu("warmup")]),
        pod("gpu-limit-number", gpu(count=2)),
        pod("gpu-limit-zero", gpu(count="0")),
        pod("no-gpu", {**container(), "resources": {"limits": {"cpu": "1"}}}),
        pod(
            "unrelated-tolerations",
            gpu(),
            tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
        ),
        pod("same-toleration", gpu(), tolerations=[same]),
        pod("same-toleration-no-operator", gpu(), tolerations=[{k: v for k, v in same.items() if k != "operator"}]),
        pod("empty-tolerations", gpu(), tolerations=[]),
        pod("required-terms", gpu(), affinity=required(*({"matchExpressions": [zone(z)]} for z in ("dc1", "dc2")))),
        pod(
            "term-already-steered",
            gpu(),
            affinity=required(
                {"matchExpressions": [gpu_expression(marking)]},
                {"matchExpressions": [{"key": hostname, "operator": "In", "values": ["w3"]}]},
            ),
        ),
        pod(
            "match-fields-term",
            gpu(),
            affinity=required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["rke2-worker-dc1-gpu-a"]}]}
            ),
        ),
        pod("empty-term", gpu(), affinity=required({})),
        pod(
            "empty-expressions-term",
            gpu(),
            affinity=required(
                {"matchExpressions": []}, {"matchExpressions": [{"key": hostname, "operator": "In", "values": ["w1"]}]}
            ),
        ),
        pod(
            "preferred-only",
            gpu(),
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "preference": {"matchExpressions": [zone("dc3")]}}
                    ]
                }
            },
        ),
        pod(
            "anti-affinity-only",
            gpu(),
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": hostname}
                    ]
                }
            },
        ),
        *(pod(f"excluded-in-{ns}", gpu(), namespace=ns) for ns in excluded_namespaces(stack)),
        # Several GPUs (issue 37 item 4): counted over containers and sidecars; a plain init container runs first.
        pod("gpu-two-containers", gpu("a"), gpu("b")),
        pod("gpu-init-then-app", gpu(), init=[gpu("warmup")]),
        pod("gpu-sidecar-and-app", gpu(), init=[{**gpu("proxy"), "restartPolicy": "Always"}]),
        pod(
            "gpu-several-own-terms",
            gpu(count="2"),
            affinity=required(
                {"matchExpressions": [zone("dc1")]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["rke2-worker-dc3-gpu-a"]}]},
                {},
            ),
        ),
        # The smoke Job's exemption takes its namespace and its label, both.
        labelled(pod(SMOKE_EXEMPT, gpu(count="2"), namespace=smoke), smoke_label()),
        pod("smoke-namespace-unlabelled-two-gpus", gpu(count="2"), namespace=smoke),
    ]
    return {p["metadata"]["name"]: p for p in pods}


def asks_for_gpu(name: str) -> bool:
    return name not in NO_GPU


def is_excluded(stack: Previewed, pod: Obj) -> bool:
    return pod["metadata"]["namespace"] in excluded_namespaces(stack)


def combinable_rules(stack: Previewed) -> list[NamespaceQuotaRule]:
    """The selector rules one namespace can match together (greedily, in order: two rules may want one label key
    with different values, as the options stack's `team-type` does)."""
    chosen: list[NamespaceQuotaRule] = []
    labels: dict[str, str] = {}
    for rule in stack.config.gpu_quotas.selectors:
        if all(labels.get(key, value) == value for key, value in rule.match_labels.items()):
            chosen.append(rule)
            labels |= rule.match_labels
    return chosen


def explicit_quota_namespaces(stack: Previewed) -> list[Obj]:
    """Each explicit gpuQuotas.namespaces entry, labelled as the first selector rule wants: the explicit entry wins,
    so no rule may generate a quota there (issue 37 item 5)."""
    selectors = stack.config.gpu_quotas.selectors
    if not selectors:
        return []
    return [namespace(name, dict(selectors[0].match_labels)) for name in sorted(stack.config.gpu_quotas.namespaces)]


def quota_namespaces(stack: Previewed) -> list[Obj]:
    """One namespace per selector rule with exactly its labels, one with the labels of as many rules as can hold
    together, one per rule with its first label set to another value, one without labels, and each explicit quota
    namespace labelled for a rule (explicit_quota_namespaces)."""
    selectors = stack.config.gpu_quotas.selectors
    several = {k: v for rule in combinable_rules(stack) for k, v in rule.match_labels.items()}
    almost = [
        namespace(f"almost-{rule.name}", {**rule.match_labels, next(iter(rule.match_labels)): "something-else"})
        for rule in selectors
    ]
    exact = [namespace(f"only-{rule.name}", dict(rule.match_labels)) for rule in selectors]
    return [
        *exact,
        namespace("several-rules", several),
        *almost,
        namespace("unlabelled"),
        *explicit_quota_namespaces(stack),
    ]


def policy_path(stack: Previewed, name: str) -> Path:
    path = stack.out / "manifests" / f"clusterpolicy-{name}.yaml"
    assert path.is_file(), f"{stack.name}: the preview wrote no ClusterPolicy {name}"
    return path


def steering_policy(stack: Previewed) -> Path:
    return policy_path(stack, stack.config.kyverno.policy_name)


def the_policy(path: Path) -> Obj:
    (document,) = load_documents(path.read_text())
    return document


def app(name: str, *, cpu: str, gpus: str | None = None, memory: str = "2Gi") -> Obj:
    """A container as the API server hands it to admission: requests defaulted from limits (the GPU's too)."""
    limits = {"memory": memory} | ({"nvidia.com/gpu": gpus} if gpus else {})
    return {"name": name, "image": IMAGE, "resources": {"requests": {"cpu": cpu, **limits}, "limits": limits}}


def cpu_guard_pods() -> dict[str, Obj]:
    pods = [
        # The article's notebook: a whole card at 0.6 CPU.
        pod("notebook-1-gpu-600m", app("notebook", cpu="600m", gpus="1")),
        pod("trainer-2-gpus-2-cpus", app("trainer", cpu="2", gpus="2")),
        pod("trainer-2-gpus-1500m", app("trainer", cpu="1500m", gpus="2")),
        pod("trainer-2-gpus-3-cpus", app("trainer", cpu="3", gpus="2")),
        # Neither container alone requests 1 CPU: only their sum does.
        pod("split-1-gpu-600m-and-400m", app("notebook", cpu="600m", gpus="1"), app("sidecar", cpu="400m")),
        # GPUs are summed over the containers too: 2 GPUs, 1500m in all.
        pod("split-2-gpus-1500m", app("a", cpu="1", gpus="1"), app("b", cpu="500m", gpus="1")),
        pod("no-gpu-100m", app("web", cpu="100m")),
        # Steered (an initContainer's GPU counts there) but not judged: the guard counts the app containers' GPUs.
        pod("gpu-only-in-init", app("main", cpu="100m"), init=[app("warmup", cpu="100m", gpus="1")]),
        pod("gpu-in-kube-system-100m", app("probe", cpu="100m", gpus="1"), namespace="kube-system"),
    ]
    return {p["metadata"]["name"]: p for p in pods}


class Runs:
    """`kyverno apply` results, computed once per (stack, question) for the module."""

    def __init__(self, kyverno: Kyverno, work: Path) -> None:
        self.kyverno = kyverno
        self.work = work
        self.cache: dict[tuple[str, str], Applied] = {}

    def steered(self, stack: Previewed) -> Applied:
        """The steering policy's rules on every pod of the table."""
        pods = list(steering_pods(stack).values())
        return self._once(stack, "steered", lambda work: self._apply(work, steering_policy(stack), pods))

    def steered_twice(self, stack: Previewed) -> Applied:
        """The same rules on every pod as the first pass left it (a webhook reinvocation, or a pod re-created from
        its own mutated manifest)."""
        first = self.steered(stack)
        pods = [first.mutated(name) for name in steering_pods(stack)]
        return self._once(stack, "twice", lambda work: self._apply(work, steering_policy(stack), pods))

    def refused(self, stack: Previewed) -> Applied:
        """The multi-GPU refusal ClusterPolicy on every pod of the steering table."""
        path, pods = policy_path(stack, MULTI_GPU_POLICY_NAME), list(steering_pods(stack).values())
        return self._once(stack, "refused", lambda work: self._apply(work, path, pods))

    def quotas(self, stack: Previewed) -> Applied:
        """The quota generate policy's rules on every namespace of `quota_namespaces`."""
        path = policy_path(stack, QUOTA_POLICY_NAME)
        return self._once(stack, "quotas", lambda work: self._apply(work, path, quota_namespaces(stack)))

    def guarded(self, stack: Previewed) -> Applied:
        """The CPU guard's rule on every pod of `cpu_guard_pods`."""
        path, pods = policy_path(stack, CPU_GUARD_POLICY_NAME), list(cpu_guard_pods().values())
        return self._once(stack, "guarded", lambda work: self._apply(work, path, pods))

    def _apply(self, work: Path, policy: Path, objects: list[Obj]) -> Applied:
        return self.kyverno.apply(work / "apply", [rules_only(policy, work / "policy")], objects)

    def _once(self, stack: Previewed, question: str, run: Callable[[Path], Applied]) -> Applied:
        key = (stack.name, question)
        if key not in self.cache:
            self.cache[key] = run(self.work / stack.name / question)
        return self.cache[key]
