"""The Kyverno ClusterPolicy `gpu-pods-to-gpu-nodes` as a plain dict: GPU pods tolerate the taint, need a GPU node.

Researched against the Kyverno v1.19 ClusterPolicy CRD (DESIGN.md section 3). The e2e tier runs it through the
real Kyverno CLI (v1.19.1) and the real API server (tests/e2e/test_kyverno_steering.py); the fast suite evaluates it
on a model built from real CEL, JMESPath and JSON-patch libraries (tests/gpu_platform/), held to the engine by the
e2e tests, and tests/contract/ validates it against the upstream CRD schema.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from components.gpu_platform.kyverno_expressions import (
    EMPTY,
    SPEC,
    condition,
    excluded_namespaces,
    gpu_pod_match_conditions,
    var,
)
from components.gpu_platform.multi_gpu import (
    NODE_LABEL,
    STEERING_RULE_NAME,
    WholeCards,
    gpu_total_expression,
    smoke_label,
)
from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from components.gpu_platform.multi_gpu import RULE_NAME as MULTI_GPU_RULE_NAME
from components.shared.kubernetes_objects import managed_labels
from config.kyverno import KyvernoConfig
from knowledge.kyverno import MINIMUM_KYVERNO_VERSION

AUTOGEN_ANNOTATION = "pod-policies.kyverno.io/autogen-controllers"

_AFFINITY = f"{SPEC}.affinity"
_NODE_AFFINITY = f"{_AFFINITY}.nodeAffinity"
_REQUIRED = f"{_NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"
_TERMS = f"{_REQUIRED}.nodeSelectorTerms"
_TERMS_POINTER = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
# Requirements in one node-selector term; zero means an empty term, which matches no node.
_TERM_SIZE = f"length([element.matchExpressions || {EMPTY}, element.matchFields || {EMPTY}][])"


def _patch(*operations: dict[str, Any]) -> str:
    """`patchesJson6902` is a YAML string; Kyverno converts it to JSON before applying it."""
    return yaml.safe_dump(list(operations), sort_keys=False, default_flow_style=False)


def _gpu_limits_expression(resource: str) -> str:
    """How many containers and initContainers set a non-zero limit for the GPU resource.

    Limits, not requests: an extended resource must be set in limits (a request alone is refused). The
    API server sends quantities in canonical form, so every zero ("0", "0m", 0) arrives as "0".
    Every value defaults to [] so no expression ever resolves to null.
    """
    return (
        f"[{SPEC}.containers || {EMPTY}, {SPEC}.initContainers || {EMPTY}][]"
        f".resources.limits.\"{resource}\" | [?to_string(@) != '0'] | length(@)"
    )


def _toleration(cfg: KyvernoConfig) -> dict[str, str]:
    return {"key": cfg.taint_key, "operator": "Equal", "value": cfg.taint_value, "effect": cfg.taint_effect}


def _node_expression(cfg: KyvernoConfig) -> dict[str, Any]:
    return {"key": cfg.gpu_node_label_key, "operator": "In", "values": [cfg.gpu_node_label_value]}


def _term_has_expression(cfg: KyvernoConfig) -> str:
    values = json.dumps([cfg.gpu_node_label_value])
    return (
        f"(element.matchExpressions || {EMPTY})"
        f"[?key=='{cfg.gpu_node_label_key}' && operator=='In' && values==`{values}`] | length(@)"
    )


# One rule's name, its preconditions beyond "asks for a GPU", and its mutation.
_Rule = tuple[str, list[dict[str, Any]], dict[str, Any]]


def _steering_rules(cfg: KyvernoConfig, excluded: list[str], whole: WholeCards) -> list[dict[str, Any]]:
    match = {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]}
    exclude = {"any": [{"resources": {"namespaces": excluded}}]}
    asks_for_gpu = condition(_gpu_limits_expression(cfg.gpu_resource), "GreaterThan", 0)

    def rule(name: str, conditions: list[dict[str, Any]], mutate: dict[str, Any]) -> dict[str, Any]:
        # Fresh copies per rule: a caller editing one rule must not silently edit the others through shared dicts.
        return copy.deepcopy(
            {
                "name": name,
                "match": match,
                "exclude": exclude,
                "preconditions": {"all": [asks_for_gpu, *conditions]},
                "mutate": mutate,
            }
        )

    # JSON patches, not patchStrategicMerge: strategic merge replaces lists without a merge key (the pod's
    # tolerations) and its +() anchor adds nothing once `affinity` exists. A JSON patch cannot test whether a
    # path exists, so each shape of the pod has its own rule, and the preconditions make them mutually
    # exclusive. Kyverno chains rules (each sees the pod as the previous rule left it) and re-invokes webhooks,
    # so every rule also checks that its addition is not already there.
    rules = [*_toleration_rules(cfg), *_affinity_rules(cfg), _every_term_rule(cfg)]
    steering = [rule(name, conditions, mutate) for name, conditions, mutate in rules]
    if not whole.profiles:
        # No whole domain to steer to (an `In` needs values); the validating policy refuses every such pod.
        return steering
    several = rule(*_whole_cards_rule(cfg, whole))
    several["exclude"]["any"].append(
        {"resources": {"namespaces": [whole.smoke_namespace], "selector": {"matchLabels": smoke_label()}}}
    )
    return [*steering, several]


def whole_cards_expression(whole: WholeCards) -> dict[str, Any]:
    return {"key": NODE_LABEL, "operator": "In", "values": list(whole.profiles)}


def _whole_cards_rule(cfg: KyvernoConfig, whole: WholeCards) -> _Rule:
    """A pod asking for several GPUs also requires a whole domain, in every term. It runs after the GPU-node rules,
    so every non-empty term already has matchExpressions (an empty term matches no node and is left alone)."""
    expression = whole_cards_expression(whole)
    values = json.dumps(list(whole.profiles))
    has_it = (
        f"(element.matchExpressions || {EMPTY})[?key=='{NODE_LABEL}' && operator=='In' && values==`{values}`]"
        " | length(@)"
    )
    return (
        STEERING_RULE_NAME,
        [
            condition(gpu_total_expression(cfg.gpu_resource), "GreaterThan", 1),
            condition(f"length({_TERMS} || {EMPTY})", "GreaterThan", 0),
        ],
        {
            "foreach": [
                {
                    "list": _TERMS,
                    "preconditions": {
                        "all": [
                            condition("type(element.matchExpressions)", "Equals", "array"),
                            condition(_TERM_SIZE, "GreaterThan", 0),
                            condition(has_it, "Equals", 0),
                        ]
                    },
                    "patchesJson6902": _patch(
                        {
                            "op": "add",
                            "path": _TERMS_POINTER + "/{{elementIndex}}/matchExpressions/-",
                            "value": expression,
                        }
                    ),
                }
            ]
        },
    )


def _toleration_rules(cfg: KyvernoConfig) -> list[_Rule]:
    """The GPU taint's toleration: a new list, or added to the pod's own when it is not there yet."""
    toleration = _toleration(cfg)
    tolerations = f"{SPEC}.tolerations || {EMPTY}"
    same_toleration = (
        f"({tolerations})[?key=='{cfg.taint_key}' && (operator=='Equal' || !operator)"
        f" && value=='{cfg.taint_value}' && effect=='{cfg.taint_effect}'] | length(@)"
    )
    return [
        (
            "tolerate-gpu-taint-new-list",
            [condition(f"length({tolerations})", "Equals", 0)],
            {"patchesJson6902": _patch({"op": "add", "path": "/spec/tolerations", "value": [toleration]})},
        ),
        (
            "tolerate-gpu-taint",
            [
                condition(f"length({tolerations})", "GreaterThan", 0),
                condition(same_toleration, "Equals", 0),
            ],
            {"patchesJson6902": _patch({"op": "add", "path": "/spec/tolerations/-", "value": toleration})},
        ),
    ]


def _affinity_rules(cfg: KyvernoConfig) -> list[_Rule]:
    """The required GPU-node term where the pod has none: one rule per level of `affinity` the pod stops at."""
    term = {"matchExpressions": [_node_expression(cfg)]}
    required = {"nodeSelectorTerms": [term]}
    return [
        (
            "require-gpu-node-new-affinity",
            [condition(f"type({_AFFINITY})", "Equals", "null")],
            {
                "patchesJson6902": _patch(
                    {
                        "op": "add",
                        "path": "/spec/affinity",
                        "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
                    }
                )
            },
        ),
        (
            "require-gpu-node-new-node-affinity",
            [
                condition(f"type({_AFFINITY})", "Equals", "object"),
                condition(f"type({_NODE_AFFINITY})", "Equals", "null"),
            ],
            {
                "patchesJson6902": _patch(
                    {
                        "op": "add",
                        "path": "/spec/affinity/nodeAffinity",
                        "value": {"requiredDuringSchedulingIgnoredDuringExecution": required},
                    }
                )
            },
        ),
        # A pod with only preferred node affinity keeps it untouched: the required rule is added beside it.
        (
            "require-gpu-node-new-required-terms",
            [
                condition(f"type({_NODE_AFFINITY})", "Equals", "object"),
                condition(f"type({_REQUIRED})", "Equals", "null"),
            ],
            {
                "patchesJson6902": _patch(
                    {
                        "op": "add",
                        "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                        "value": required,
                    }
                )
            },
        ),
        (
            "require-gpu-node-empty-required-terms",
            [
                condition(f"type({_REQUIRED})", "Equals", "object"),
                condition(f"length({_TERMS} || {EMPTY})", "Equals", 0),
            ],
            {"patchesJson6902": _patch({"op": "add", "path": _TERMS_POINTER, "value": [term]})},
        ),
    ]


def _every_term_rule(cfg: KyvernoConfig) -> _Rule:
    """Required terms are ORed: the pod's own terms stay, and each gains the GPU expression (ANDed inside the
    term), so the pod still lands only where the user said, and only on GPU nodes. An empty term matches no node;
    extending it would make it match every GPU node, so it is left alone."""
    expression = _node_expression(cfg)
    return (
        "require-gpu-node-in-every-term",
        [condition(f"length({_TERMS} || {EMPTY})", "GreaterThan", 0)],
        {
            "foreach": [
                {
                    "list": _TERMS,
                    "preconditions": {
                        "all": [
                            condition("type(element.matchExpressions)", "Equals", "array"),
                            condition(_TERM_SIZE, "GreaterThan", 0),
                            condition(_term_has_expression(cfg), "Equals", 0),
                        ]
                    },
                    "patchesJson6902": _patch(
                        {
                            "op": "add",
                            "path": _TERMS_POINTER + "/{{elementIndex}}/matchExpressions/-",
                            "value": expression,
                        }
                    ),
                },
                {
                    "list": _TERMS,
                    "preconditions": {
                        "all": [
                            condition("type(element.matchExpressions)", "Equals", "null"),
                            condition(f"length(element.matchFields || {EMPTY})", "GreaterThan", 0),
                        ]
                    },
                    "patchesJson6902": _patch(
                        {
                            "op": "add",
                            "path": _TERMS_POINTER + "/{{elementIndex}}/matchExpressions",
                            "value": [expression],
                        }
                    ),
                },
            ]
        },
    )


def build_gpu_steering_policy(cfg: KyvernoConfig, *, operator_namespace: str, whole: WholeCards) -> dict[str, Any]:
    """ClusterPolicy `gpu-pods-to-gpu-nodes`: GPU pods tolerate the GPU taint and require a GPU node, and one that
    asks for several GPUs requires a domain whose cards are whole (components/gpu_platform/multi_gpu.py)."""
    excluded = excluded_namespaces(cfg, operator_namespace)
    label = f"{cfg.gpu_node_label_key}={cfg.gpu_node_label_value}"
    taint = f"{cfg.taint_key}={cfg.taint_value}:{cfg.taint_effect}"
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": cfg.policy_name,
            "labels": managed_labels(),
            "annotations": {
                "policies.kyverno.io/title": "Steer GPU pods to GPU nodes",
                "policies.kyverno.io/category": "GPU",
                "policies.kyverno.io/subject": "Pod",
                "policies.kyverno.io/minversion": MINIMUM_KYVERNO_VERSION,
                "policies.kyverno.io/description": (
                    f"A Pod whose containers or initContainers set a non-zero {cfg.gpu_resource} limit gets a "
                    f"toleration for the GPU taint {taint} and a required node affinity {label}, added to every "
                    "required node-selector term it already has; one asking for more than one GPU also requires "
                    f"{NODE_LABEL} to be a whole profile. Pods without GPUs are never sent to Kyverno."
                ),
                # Autogen off: rewriting Deployments and Jobs would make Pulumi-managed workloads drift.
                # Their pods are still mutated, at pod CREATE.
                AUTOGEN_ANNOTATION: "none",
            },
        },
        "spec": {
            "admission": True,
            # Mutating admission only: there is nothing to scan in the background.
            "background": False,
            "webhookConfiguration": {
                "failurePolicy": cfg.failure_policy,
                "timeoutSeconds": cfg.webhook_timeout_seconds,
                # Fail closed but scoped: the API server only calls Kyverno for GPU pods outside the excluded
                # namespaces, so a Kyverno outage delays GPU pods and never blocks the rest of the cluster,
                # nor the operator's own validator pods, which request a GPU in its namespace.
                "matchConditions": gpu_pod_match_conditions(cfg, excluded),
            },
            # CREATE only: node affinity is immutable on a running pod, so an UPDATE patch would be refused.
            "rules": _steering_rules(cfg, excluded, whole),
        },
    }


def build_multi_gpu_policy(cfg: KyvernoConfig, *, operator_namespace: str, whole: WholeCards) -> dict[str, Any]:
    """ClusterPolicy refusing (Enforce) a pod that asks for more GPUs than any whole domain has cards: a mutation can
    only add the affinity, and a pod no node can honestly hold should fail at admission, not sit Pending."""
    excluded = excluded_namespaces(cfg, operator_namespace)
    gpus = gpu_total_expression(cfg.gpu_resource)
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": MULTI_GPU_POLICY_NAME,
            "labels": managed_labels(),
            "annotations": {
                "policies.kyverno.io/title": "Multi-GPU pods need whole cards",
                "policies.kyverno.io/category": "GPU",
                "policies.kyverno.io/subject": "Pod",
                "policies.kyverno.io/minversion": MINIMUM_KYVERNO_VERSION,
                "policies.kyverno.io/description": (
                    f"Refuses a Pod asking for more {cfg.gpu_resource} than any domain with whole (not time-sliced) "
                    f"cards has: at most {whole.limit}."
                ),
                AUTOGEN_ANNOTATION: "none",
            },
        },
        "spec": {
            "admission": True,
            "background": False,
            "webhookConfiguration": {
                "failurePolicy": cfg.failure_policy,
                "timeoutSeconds": cfg.webhook_timeout_seconds,
                "matchConditions": gpu_pod_match_conditions(cfg, excluded),
            },
            "rules": [
                {
                    "name": MULTI_GPU_RULE_NAME,
                    "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]},
                    "exclude": {
                        "any": [
                            {"resources": {"namespaces": excluded}},
                            {
                                "resources": {
                                    "namespaces": [whole.smoke_namespace],
                                    "selector": {"matchLabels": smoke_label()},
                                }
                            },
                        ]
                    },
                    "validate": {
                        "failureAction": "Enforce",
                        "message": f"asks for {var(gpus)} {cfg.gpu_resource}{whole.refusal_text(cfg.gpu_resource)}",
                        "deny": {"conditions": {"all": [condition(gpus, "GreaterThan", whole.limit)]}},
                    },
                }
            ],
        },
    }
