"""gpu-pool's three Kyverno policies as the CEL types of `policies.kyverno.io/v1` (`kyverno.policyApi: cel`).

Kyverno deprecated ClusterPolicy in 1.17 and 1.19 announces its removal in 1.20; MutatingPolicy, GeneratingPolicy
and ValidatingPolicy replace it (kyverno.io/docs/policy-types). Each policy here does what its ClusterPolicy twin
does (steering_policy.py, quota_policy.py, cpu_guard_policy.py), case by case, which the e2e tier proves with the
real Kyverno CLI (tests/e2e/test_kyverno_cel_policies.py). Fields as the v1.19.0 CRDs define them
(config/crds/policies.kyverno.io/ at tag v1.19.0); the CEL environment is Kyverno's (pkg/cel/compiler/env.go at
v1.19.0: optionals, Kubernetes' list library with `sum()`, cel-go lists v3 with `lists.range`, quantities), with
homogeneous aggregate literals enforced, hence the `dyn()` around values of mixed type.
"""

from __future__ import annotations

from typing import Any

from components.gpu_platform.cpu_guard_policy import POLICY_NAME as CPU_GUARD_POLICY_NAME
from components.gpu_platform.kyverno_expressions import cel_string_list, excluded_namespaces, gpu_cel_condition
from components.gpu_platform.multi_gpu import NODE_LABEL, WholeCards, gpu_total_cel, smoke_label
from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from components.gpu_platform.quota_policy import QUOTA_POLICY_NAME, explicit_namespaces_cel
from components.gpu_platform.quotas import quota_data, quota_key
from components.shared.kubernetes_objects import managed_labels
from config.gpu_quotas import GpuQuotasConfig, NamespaceQuotaRule
from config.kyverno import KyvernoConfig
from config.project import PROJECT

API_VERSION = "policies.kyverno.io/v1"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_TERMS_POINTER = f"/spec/affinity/nodeAffinity/{_REQUIRED}/nodeSelectorTerms"


def _q(value: str) -> str:
    """A CEL string literal (the values are label keys/values and resource names, which never hold quotes)."""
    assert "'" not in value and "\\" not in value, value
    return f"'{value}'"


def _pods_on_create(excluded: list[str]) -> dict[str, Any]:
    return {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        # Kubernetes labels every namespace with its name: the excluded ones never reach Kyverno.
        "namespaceSelector": {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}]
        },
    }


def _gpu_pod_conditions(cfg: KyvernoConfig, excluded: list[str]) -> list[dict[str, str]]:
    return [
        {"name": "asks-for-gpu", "expression": gpu_cel_condition(cfg.gpu_resource)},
        {"name": "not-in-excluded-namespace", "expression": f"!(request.namespace in {cel_string_list(excluded)})"},
    ]


def _metadata(name: str, title: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": managed_labels(),
        "annotations": {
            "policies.kyverno.io/title": title,
            "policies.kyverno.io/category": "GPU",
            "policies.kyverno.io/subject": "Pod",
            "policies.kyverno.io/description": description,
        },
    }


def _term(i: str) -> str:
    return f"variables.terms[{i}]"


def _needs_gpu_node(cfg: KyvernoConfig, i: str) -> str:
    """CEL: term `i` is not empty (an empty term matches no node) and lacks the GPU node rule."""
    expressions = f"{_term(i)}.?matchExpressions.orValue([])"
    rule = (
        f"e.?key.orValue('') == {_q(cfg.gpu_node_label_key)} && e.?operator.orValue('') == 'In'"
        f" && e.?values.orValue([]) == [{_q(cfg.gpu_node_label_value)}]"
    )
    return f"size({expressions}) + size({_term(i)}.?matchFields.orValue([])) > 0 && !{expressions}.exists(e, {rule})"


def _has_whole_cards(i: str) -> str:
    rule = (
        f"e.?key.orValue('') == {_q(NODE_LABEL)} && e.?operator.orValue('') == 'In'"
        " && e.?values.orValue([]) == variables.wholeCards.values"
    )
    return f"{_term(i)}.?matchExpressions.orValue([]).exists(e, {rule})"


def _steering_mutations(cfg: KyvernoConfig, whole: WholeCards) -> list[dict[str, Any]]:
    # A pod asking for several GPUs also requires a whole domain (multi_gpu.py): its new term carries both rules, and
    # each non-empty term of its own gains the whole-cards rule after the GPU-node rule, in the order the
    # ClusterPolicy's chained rules add them.
    added = (
        "(variables.several ? [variables.gpuNode, variables.wholeCards] : [variables.gpuNode])"
        if whole.profiles
        else "[variables.gpuNode]"
    )
    term = f'{{"matchExpressions": {added}}}'
    required = f'{{"nodeSelectorTerms": [{term}]}}'
    # Each shape of the pod gets the one patch that fits it, as the ClusterPolicy's mutually exclusive rules did;
    # a pod that already has what a patch adds gets none (Kyverno re-invokes mutations: IfNeeded).
    tolerate = (
        "size(variables.tolerations) == 0"
        ' ? [JSONPatch{op: "add", path: "/spec/tolerations", value: [variables.toleration]}]'
        " : (variables.tolerated ? []"
        ' : [JSONPatch{op: "add", path: "/spec/tolerations/-", value: variables.toleration}])'
    )
    # Required terms are ORed: each non-empty term gains the GPU rule (ANDed inside it), so the pod still lands only
    # where its author said, and only on GPU nodes; an empty term matches no node and is left alone.
    in_every_term = (
        f"lists.range(size(variables.terms)).filter(i, {_needs_gpu_node(cfg, 'i')}).map(i, "
        f"has({_term('i')}.matchExpressions)"
        f' ? JSONPatch{{op: "add", path: "{_TERMS_POINTER}/" + string(i) + "/matchExpressions/-",'
        " value: variables.gpuNode}"
        f' : JSONPatch{{op: "add", path: "{_TERMS_POINTER}/" + string(i) + "/matchExpressions",'
        " value: [variables.gpuNode]})"
    )
    if whole.profiles:
        # After the patches above every non-empty term has matchExpressions, so appending is always right.
        non_empty = (
            f"size({_term('i')}.?matchExpressions.orValue([])) + size({_term('i')}.?matchFields.orValue([])) > 0"
        )
        in_every_term = (
            f"({in_every_term}) + (variables.several ? lists.range(size(variables.terms)).filter(i, {non_empty}"
            f' && !{_has_whole_cards("i")}).map(i, JSONPatch{{op: "add", path: "{_TERMS_POINTER}/" + string(i)'
            ' + "/matchExpressions/-", value: variables.wholeCards}) : [])'
        )
    require = (
        "!has(object.spec.affinity)"
        f' ? [JSONPatch{{op: "add", path: "/spec/affinity", value: {{"nodeAffinity": {{"{_REQUIRED}": {required}}}}}}}]'
        " : !has(object.spec.affinity.nodeAffinity)"
        f' ? [JSONPatch{{op: "add", path: "/spec/affinity/nodeAffinity", value: {{"{_REQUIRED}": {required}}}}}]'
        f" : !has(object.spec.affinity.nodeAffinity.{_REQUIRED})"
        f' ? [JSONPatch{{op: "add", path: "/spec/affinity/nodeAffinity/{_REQUIRED}", value: {required}}}]'
        " : size(variables.terms) == 0"
        f' ? [JSONPatch{{op: "add", path: "{_TERMS_POINTER}", value: [{term}]}}]'
        f" : {in_every_term}"
    )
    return [
        {"patchType": "JSONPatch", "jsonPatch": {"expression": tolerate}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": require}},
    ]


def _smoke_job(namespace: str) -> str:
    """CEL: the pod is one of the program's smoke Jobs' (their namespace and label), exempt from the multi-GPU rule."""
    ((key, value),) = smoke_label().items()
    return f"(request.namespace == {_q(namespace)} && object.metadata.?labels[{_q(key)}].orValue('') == {_q(value)})"


def _several_variables(cfg: KyvernoConfig, whole: WholeCards) -> list[dict[str, str]]:
    if not whole.profiles:
        return []
    return [
        {"name": "gpus", "expression": gpu_total_cel(cfg.gpu_resource)},
        {"name": "several", "expression": f"variables.gpus > 1 && !{_smoke_job(whole.smoke_namespace)}"},
        {
            "name": "wholeCards",
            "expression": (
                f'{{"key": dyn({_q(NODE_LABEL)}), "operator": dyn("In"),'
                f' "values": dyn({cel_string_list(list(whole.profiles))})}}'
            ),
        },
    ]


def build_gpu_steering_mutating_policy(
    cfg: KyvernoConfig, *, operator_namespace: str, whole: WholeCards
) -> dict[str, Any]:
    """MutatingPolicy `gpu-pods-to-gpu-nodes`: GPU pods tolerate the GPU taint and require a GPU node."""
    excluded = excluded_namespaces(cfg, operator_namespace)
    key, value = cfg.gpu_node_label_key, cfg.gpu_node_label_value
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingPolicy",
        "metadata": _metadata(
            cfg.policy_name,
            "Steer GPU pods to GPU nodes",
            f"A Pod whose containers or initContainers set a non-zero {cfg.gpu_resource} limit gets a toleration for "
            f"the GPU taint {cfg.taint_key}={cfg.taint_value}:{cfg.taint_effect} and a required node affinity "
            f"{key}={value}, added to every required node-selector term it already has; one asking for more than one "
            f"GPU also requires {NODE_LABEL} to be a whole profile. Pods without GPUs are never sent to Kyverno.",
        ),
        "spec": {
            "failurePolicy": cfg.failure_policy,
            "webhookConfiguration": {"timeoutSeconds": cfg.webhook_timeout_seconds},
            # Admission only, as the ClusterPolicy's background: false: node affinity is immutable on a running pod.
            "evaluation": {"admission": {"enabled": True}, "mutateExisting": {"enabled": False}},
            # No autogen: rewriting Deployments and Jobs would make Pulumi-managed workloads drift; their pods
            # are mutated at pod CREATE.
            "autogen": {"podControllers": {"controllers": []}},
            "matchConstraints": _pods_on_create(excluded),
            "matchConditions": _gpu_pod_conditions(cfg, excluded),
            "reinvocationPolicy": "IfNeeded",
            "variables": [
                {
                    "name": "toleration",
                    "expression": (
                        f'{{"key": {_q(cfg.taint_key)}, "operator": "Equal", "value": {_q(cfg.taint_value)},'
                        f' "effect": {_q(cfg.taint_effect)}}}'
                    ),
                },
                {"name": "tolerations", "expression": "object.spec.?tolerations.orValue([])"},
                {
                    "name": "tolerated",
                    "expression": (
                        f"variables.tolerations.exists(t, t.?key.orValue('') == {_q(cfg.taint_key)}"
                        " && t.?operator.orValue('Equal') == 'Equal'"
                        f" && t.?value.orValue('') == {_q(cfg.taint_value)}"
                        f" && t.?effect.orValue('') == {_q(cfg.taint_effect)})"
                    ),
                },
                {
                    "name": "gpuNode",
                    "expression": f'{{"key": dyn({_q(key)}), "operator": dyn("In"), "values": dyn([{_q(value)}])}}',
                },
                {
                    "name": "terms",
                    "expression": f"object.spec.?affinity.?nodeAffinity.?{_REQUIRED}.?nodeSelectorTerms.orValue([])",
                },
                *_several_variables(cfg, whole),
            ],
            "mutations": _steering_mutations(cfg, whole),
        },
    }


def _quota_policy(rule: NamespaceQuotaRule, quotas: GpuQuotasConfig) -> dict[str, Any]:
    labels = " && ".join(
        f"object.metadata.?labels[{_q(k)}].orValue('') == {_q(v)}" for k, v in sorted(rule.match_labels.items())
    )
    quota = (
        '[{"apiVersion": dyn("v1"), "kind": dyn("ResourceQuota"), "metadata": dyn({'
        f'"name": {_q(f"{quotas.quota_name}-{rule.name}")}, "namespace": string(object.metadata.name), '
        f'"labels": {{"app.kubernetes.io/part-of": "{PROJECT}"}}}}), "spec": dyn({{"hard": {{'
        + ", ".join(f"{_q(k)}: {_q(str(v))}" for k, v in quota_data(rule.max_gpus)["spec"]["hard"].items())
        + "}})}]"
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "GeneratingPolicy",
        "metadata": {
            **_metadata(
                f"{QUOTA_POLICY_NAME}-{rule.name}",
                "GPU quota for labelled namespaces",
                "A quota only limits what it names: a namespace whose ResourceQuota caps CPU and memory can still "
                f"take every GPU. Each namespace labelled {dict(rule.match_labels)} gets a ResourceQuota on "
                f"{quota_key()}, existing namespaces included, kept in sync.",
            ),
        },
        "spec": {
            "webhookConfiguration": {"timeoutSeconds": 10},
            "evaluation": {
                "admission": {"enabled": True},
                "generateExisting": {"enabled": True},
                # A quota someone edits or deletes is put back, and a namespace that stops matching loses it
                # (kyverno test/conformance/.../sync-trigger-stops-matching at v1.19.0).
                "synchronize": {"enabled": True},
            },
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["namespaces"],
                    }
                ]
            },
            "matchConditions": [
                {"name": "labelled-for-gpu-quota", "expression": labels},
                # An explicit gpuQuotas.namespaces entry wins: Pulumi owns that namespace's one GPU quota.
                {"name": "no-explicit-gpu-quota", "expression": f"!{explicit_namespaces_cel(quotas, 'object')}"},
            ],
            "generate": [{"expression": f"generator.apply(object.metadata.name, {quota})"}],
        },
    }


def build_gpu_quota_generating_policies(quotas: GpuQuotasConfig) -> list[dict[str, Any]]:
    """One GeneratingPolicy per selector rule: each namespace it selects gets that rule's GPU quota."""
    return [_quota_policy(rule, quotas) for rule in quotas.selectors]


def build_cpu_guard_validating_policy(cfg: KyvernoConfig, *, operator_namespace: str) -> dict[str, Any] | None:
    """ValidatingPolicy auditing GPU pods that request less than `kyverno.minCpuPerGpu` CPU per GPU; None when off."""
    if cfg.min_cpu_per_gpu is None:
        return None
    excluded = excluded_namespaces(cfg, operator_namespace)
    resource = _q(cfg.gpu_resource)
    minimum = cfg.min_cpu_per_gpu
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingPolicy",
        "metadata": _metadata(
            CPU_GUARD_POLICY_NAME,
            "GPU pods request enough CPU to use their GPUs",
            f"Audits Pods whose app containers set a {cfg.gpu_resource} limit and together request less than "
            f"{minimum} CPU per GPU: a card held by a pod that cannot feed it is a card nobody else can use.",
        ),
        "spec": {
            # Audit never refuses a pod; a Kyverno outage must not either.
            "validationActions": ["Audit"],
            "failurePolicy": "Ignore",
            "webhookConfiguration": {"timeoutSeconds": cfg.webhook_timeout_seconds},
            # Background scans report the pods that ran before the policy existed.
            "evaluation": {"admission": {"enabled": True}, "background": {"enabled": True}},
            "autogen": {"podControllers": {"controllers": []}},
            "matchConstraints": _pods_on_create(excluded),
            "matchConditions": _gpu_pod_conditions(cfg, excluded),
            "variables": [
                {
                    # App containers only, limits (an extended resource's request defaults to its limit).
                    "name": "gpus",
                    "expression": (
                        f"object.spec.containers.map(c, quantity(c.?resources.?limits[{resource}]"
                        ".orValue('0')).asInteger()).sum()"
                    ),
                },
                {
                    # Millicores; the API server defaults a container's request to its limit before admission.
                    "name": "cpuMilli",
                    "expression": (
                        "object.spec.containers.map(c, int(math.round(quantity(c.?resources.?requests['cpu']"
                        ".orValue('0')).asApproximateFloat() * 1000.0))).sum()"
                    ),
                },
                {
                    "name": "requiredMilli",
                    "expression": (
                        f"int(math.round(quantity({_q(minimum)}).asApproximateFloat() * 1000.0)) * variables.gpus"
                    ),
                },
            ],
            "validations": [
                {
                    "expression": "variables.gpus == 0 || variables.cpuMilli >= variables.requiredMilli",
                    "messageExpression": (
                        f"'asks for ' + string(variables.gpus) + ' {cfg.gpu_resource} but requests ' + "
                        "string(variables.cpuMilli) + 'm CPU; a GPU pod should request at least "
                        f"{minimum} CPU per GPU (' + string(variables.requiredMilli) + 'm), or it holds a whole "
                        "card it cannot feed'"
                    ),
                }
            ],
        },
    }


def build_multi_gpu_validating_policy(
    cfg: KyvernoConfig, *, operator_namespace: str, whole: WholeCards
) -> dict[str, Any]:
    """ValidatingPolicy refusing (Deny) a pod that asks for more GPUs than any whole domain has cards: the twin of
    steering_policy.build_multi_gpu_policy."""
    excluded = excluded_namespaces(cfg, operator_namespace)
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingPolicy",
        "metadata": _metadata(
            MULTI_GPU_POLICY_NAME,
            "Multi-GPU pods need whole cards",
            f"Refuses a Pod asking for more {cfg.gpu_resource} than any domain with whole (not time-sliced) cards "
            f"has: at most {whole.limit}.",
        ),
        "spec": {
            "validationActions": ["Deny"],
            "failurePolicy": cfg.failure_policy,
            "webhookConfiguration": {"timeoutSeconds": cfg.webhook_timeout_seconds},
            "evaluation": {"admission": {"enabled": True}, "background": {"enabled": False}},
            "autogen": {"podControllers": {"controllers": []}},
            "matchConstraints": _pods_on_create(excluded),
            "matchConditions": [
                *_gpu_pod_conditions(cfg, excluded),
                {"name": "not-a-smoke-job", "expression": f"!{_smoke_job(whole.smoke_namespace)}"},
            ],
            "variables": [{"name": "gpus", "expression": gpu_total_cel(cfg.gpu_resource)}],
            "validations": [
                {
                    "expression": f"variables.gpus <= {whole.limit}",
                    "messageExpression": (
                        f"'asks for ' + string(variables.gpus) + ' {cfg.gpu_resource}"
                        f"{whole.refusal_text(cfg.gpu_resource)}'"
                    ),
                }
            ],
        },
    }
