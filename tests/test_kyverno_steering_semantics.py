"""What the GPU steering policy does to real pods, simulated with the libraries Kyverno's semantics rest on.

Kyverno cannot run here, so this file is a small, strict model of the parts of Kyverno the policy uses:
- the API server evaluates `webhookConfiguration.matchConditions` (CEL, with `celpy`) and only calls
  Kyverno when all are true;
- Kyverno matches each rule (kinds, operations, namespaces), resolves its `{{ }}` variables with JMESPath
  (`jmespath`, standard functions only), evaluates the preconditions, and applies `patchesJson6902`
  (`jsonpatch`), chaining rules so each sees the pod as the previous rule left it; `foreach` entries get
  `element` / `elementIndex` per list item.
Anything outside that subset raises `UnsupportedConstruct`, so the policy cannot drift into constructs the
model would silently misread.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import celpy
import jmespath
import jsonpatch
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType

from components.kyverno_policies import AUTOGEN_ANNOTATION, build_gpu_steering_policy
from config.kyverno import MINIMUM_KYVERNO_VERSION, KyvernoConfig

OPERATOR_NAMESPACE = "gpu-operator"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
GPU_EXPRESSION = {"key": "nodepool", "operator": "In", "values": ["gpu"]}
GPU_NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [GPU_EXPRESSION]}]}
}


# --------------------------------------------------------------------------------------------------------
# The model of the API server and Kyverno
# --------------------------------------------------------------------------------------------------------


class UnsupportedConstruct(AssertionError):
    """The policy uses something this model does not implement; extend the model before trusting a result."""


class UnresolvedVariable(AssertionError):
    """A `{{ }}` resolved to null: Kyverno's behaviour then depends on where the variable is; the policy must
    default every expression (`|| \\`[]\\``) so this never happens."""


_WHOLE_VARIABLE = re.compile(r"^\{\{\s*(.+?)\s*\}\}$", re.DOTALL)
_ELEMENT_INDEX = re.compile(r"\{\{\s*elementIndex\s*\}\}")


def _only(mapping: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(mapping) - allowed
    if unknown:
        raise UnsupportedConstruct(f"{where}: the model does not implement {sorted(unknown)}")


def resolve(value: Any, context: dict[str, Any]) -> Any:
    """A precondition key or value: a literal, or one whole `{{ JMESPath }}` whose result keeps its JSON type."""
    if not isinstance(value, str):
        return value
    whole = _WHOLE_VARIABLE.match(value)
    if whole is None:
        if "{{" in value or "$(" in value:
            raise UnsupportedConstruct(f"variable embedded in a longer string: {value!r}")
        return value
    expression = whole.group(1)
    if "{{" in expression:
        raise UnsupportedConstruct(f"nested variable: {value!r}")
    result = jmespath.search(expression, context)
    if result is None:
        raise UnresolvedVariable(f"{expression!r} resolved to null")
    return result


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _condition_holds(condition: Mapping[str, Any], context: dict[str, Any]) -> bool:
    _only(condition, {"key", "operator", "value", "message"}, "precondition")
    key = resolve(condition["key"], context)
    value = resolve(condition.get("value"), context)
    operator = condition["operator"]
    if operator in {"Equals", "NotEquals"}:
        equal = float(key) == float(value) if _is_number(key) and _is_number(value) else key == value
        return equal if operator == "Equals" else not equal
    if operator == "GreaterThan":
        if not (_is_number(key) and _is_number(value)):
            raise UnsupportedConstruct(f"GreaterThan on non-numbers {key!r} > {value!r}")
        return bool(key > value)
    raise UnsupportedConstruct(f"operator {operator!r}")


def preconditions_pass(block: Any, context: dict[str, Any]) -> bool:
    """Kyverno substitutes every variable before evaluating, so one bad expression fails even after a false one."""
    if block is None:
        return True
    if not isinstance(block, dict):
        raise UnsupportedConstruct("preconditions as a bare list (deprecated form)")
    _only(block, {"all", "any"}, "preconditions")
    all_results = [_condition_holds(c, context) for c in block.get("all", [])]
    any_results = [_condition_holds(c, context) for c in block.get("any", [])]
    return all(all_results) and (not any_results or any(any_results))


def _resource_block_matches(block: Mapping[str, Any], request: dict[str, Any]) -> bool:
    _only(block, {"resources"}, "match/exclude entry")
    resources = block["resources"]
    _only(resources, {"kinds", "operations", "namespaces", "selector"}, "match/exclude resources")
    obj = request["object"]
    if "kinds" in resources and request["kind"]["kind"] not in resources["kinds"]:
        return False
    if "operations" in resources and request["operation"] not in resources["operations"]:
        return False
    if "namespaces" in resources and request["namespace"] not in resources["namespaces"]:
        return False
    if "selector" in resources:
        _only(resources["selector"], {"matchLabels"}, "selector")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in resources["selector"]["matchLabels"].items()):
            return False
    return True


def rule_matches(rule: Mapping[str, Any], request: dict[str, Any]) -> bool:
    for part in ("match", "exclude"):
        if part in rule:
            _only(rule[part], {"any"}, part)
    if not any(_resource_block_matches(b, request) for b in rule["match"]["any"]):
        return False
    return not any(_resource_block_matches(b, request) for b in rule.get("exclude", {}).get("any", []))


def _apply_patch(text: str, resource: dict[str, Any], element_index: int | None = None) -> dict[str, Any]:
    if element_index is not None:
        text = _ELEMENT_INDEX.sub(str(element_index), text)
    if "{{" in text or "$(" in text:
        raise UnsupportedConstruct(f"unresolved variable in patchesJson6902: {text!r}")
    operations = yaml.safe_load(text)  # Kyverno reads the patch as YAML and converts it to JSON
    patched: dict[str, Any] = jsonpatch.JsonPatch(operations).apply(resource)
    return patched


def _context(request: dict[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    return {"request": {**request, "object": resource}}


def apply_rule(rule: Mapping[str, Any], request: dict[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    _only(rule, {"name", "match", "exclude", "preconditions", "mutate"}, f"rule {rule.get('name')}")
    if not preconditions_pass(rule.get("preconditions"), _context(request, resource)):
        return resource
    mutate = rule["mutate"]
    _only(mutate, {"patchesJson6902", "foreach"}, "mutate")
    if "patchesJson6902" in mutate:
        resource = _apply_patch(mutate["patchesJson6902"], resource)
    for entry in mutate.get("foreach", []):
        _only(entry, {"list", "preconditions", "patchesJson6902"}, "mutate.foreach")
        # The list and each element's preconditions see the pod as it was when this entry started;
        # patches accumulate on the running copy, and the next entry sees the result.
        context = _context(request, resource)
        elements = jmespath.search(entry["list"], context)
        if not isinstance(elements, list):
            raise UnresolvedVariable(f"foreach list {entry['list']!r} is {elements!r}, not a list")
        patched = resource
        for index, element in enumerate(elements):
            if element is None:
                continue
            element_context = {**context, "element": element, "elementIndex": index}
            if preconditions_pass(entry.get("preconditions"), element_context):
                patched = _apply_patch(entry["patchesJson6902"], patched, element_index=index)
        resource = patched
    return resource


def webhook_called(policy: Mapping[str, Any], request: dict[str, Any]) -> bool:
    """The API server's side: all matchConditions must be true for the request to reach Kyverno."""
    env = celpy.Environment()
    activation = {
        "object": json_to_cel(request["object"]),
        "request": json_to_cel({k: v for k, v in request.items() if k != "object"}),
    }
    for condition in policy["spec"]["webhookConfiguration"].get("matchConditions", []):
        result = env.program(env.compile(condition["expression"])).evaluate(activation)
        if not isinstance(result, BoolType):
            raise AssertionError(f"matchCondition {condition['name']} returned {result!r}, not a bool")
        if not result:
            return False
    return True


def test_deleting_a_gpu_pod_never_reaches_the_fail_closed_webhook() -> None:
    policy = build_gpu_steering_policy(KyvernoConfig(), operator_namespace="gpu-operator")
    request = {"operation": "DELETE", "namespace": "team-a", "object": None}
    assert webhook_called(policy, request) is False


def run_rules(policy: Mapping[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """Kyverno's side alone (as the Kyverno CLI runs it): rules in order, chained."""
    _only(policy["spec"], {"admission", "background", "webhookConfiguration", "rules"}, "spec")
    resource: dict[str, Any] = copy.deepcopy(request["object"])
    for rule in policy["spec"]["rules"]:
        current = {**request, "object": resource}
        if rule_matches(rule, current):
            resource = apply_rule(rule, current, resource)
    return resource


def pod_request(pod: dict[str, Any], *, namespace: str = "default", operation: str = "CREATE") -> dict[str, Any]:
    return {
        "operation": operation,
        "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": copy.deepcopy(pod),
    }


def admit(policy: Mapping[str, Any], pod: dict[str, Any], *, namespace: str = "default") -> dict[str, Any]:
    """The pod as stored after admission: unchanged unless the webhook is called."""
    request = pod_request(pod, namespace=namespace)
    if not webhook_called(policy, request):
        return copy.deepcopy(pod)
    return run_rules(policy, request)


# --------------------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------------------


def container(name: str = "main", gpu: Any = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"}
    if gpu is not None:
        spec["resources"] = {"limits": {"nvidia.com/gpu": gpu}}
    spec.update(extra)
    return spec


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": list(containers) or [container()], **spec}
    if init is not None:
        body["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": body}


GPU = "1"  # the API server sends quantities in canonical string form

PODS: dict[str, dict[str, Any]] = {
    "gpu in a container": pod(container(gpu=GPU)),
    "gpu only in an initContainer": pod(container(), init=[container("warmup", gpu=GPU)]),
    "gpu limit as a JSON number": pod(container(gpu=2)),
    "gpu limit zero": pod(container(gpu="0")),
    "no gpu": pod(container(resources={"limits": {"cpu": "1"}})),
    "unrelated tolerations": pod(
        container(gpu=GPU),
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    ),
    "identical toleration": pod(container(gpu=GPU), tolerations=[dict(GPU_TOLERATION)]),
    "identical toleration without operator": pod(
        container(gpu=GPU), tolerations=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    ),
    "empty tolerations": pod(container(gpu=GPU), tolerations=[]),
    "required terms": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc1"]}
                            ]
                        },
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc2"]}
                            ]
                        },
                    ]
                }
            }
        },
    ),
    "term already steered": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [dict(GPU_EXPRESSION)]},
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w3"]}]},
                    ]
                }
            }
        },
    ),
    "term with only matchFields": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["rke2-worker-dc1-gpu-a"]}
                            ]
                        }
                    ]
                }
            }
        },
    ),
    "empty term": pod(
        container(gpu=GPU),
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}},
    ),
    "term with an empty expression list": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": []},
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w1"]}]},
                    ]
                }
            }
        },
    ),
    "preferred affinity only": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc3"]}
                            ]
                        },
                    }
                ]
            }
        },
    ),
    "pod anti-affinity only": pod(
        container(gpu=GPU),
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    ),
}


NO_GPU = {"gpu limit zero", "no gpu"}


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    return build_gpu_steering_policy(KyvernoConfig(), operator_namespace=OPERATOR_NAMESPACE)


def _required_terms(admitted: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = admitted["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return terms


# --------------------------------------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------------------------------------


def test_a_gpu_pod_gets_exactly_the_toleration_and_node_rule_the_article_shows(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu in a container"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}
    assert admitted["spec"]["containers"] == PODS["gpu in a container"]["spec"]["containers"]


def test_a_gpu_asked_for_only_by_an_init_container_still_steers_the_pod(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu only in an initContainer"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}


def test_a_gpu_limit_given_as_a_number_counts_like_the_canonical_string(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu limit as a JSON number"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]


@pytest.mark.parametrize("name", sorted(NO_GPU))
def test_a_pod_without_a_non_zero_gpu_limit_never_reaches_kyverno_and_is_unchanged(
    policy: dict[str, Any], name: str
) -> None:
    assert not webhook_called(policy, pod_request(PODS[name]))
    assert admit(policy, PODS[name]) == PODS[name]


@pytest.mark.parametrize("name", sorted(NO_GPU))
def test_the_rules_alone_leave_a_non_gpu_pod_unchanged_where_match_conditions_do_not_apply(
    policy: dict[str, Any], name: str
) -> None:
    # The Kyverno CLI and older API servers do not evaluate matchConditions: the preconditions must agree.
    assert run_rules(policy, pod_request(PODS[name])) == PODS[name]


def test_match_conditions_and_rule_preconditions_agree_on_which_pods_ask_for_a_gpu(policy: dict[str, Any]) -> None:
    for name, body in PODS.items():
        asks_for_gpu = name not in NO_GPU
        assert webhook_called(policy, pod_request(body)) == asks_for_gpu, name
        # Every GPU pod in the table lacks the toleration or the node rule, so the rules must change it.
        assert (run_rules(policy, pod_request(body)) != body) == asks_for_gpu, name


def test_unrelated_tolerations_are_kept_and_the_gpu_toleration_is_appended(policy: dict[str, Any]) -> None:
    original = PODS["unrelated tolerations"]["spec"]["tolerations"]
    admitted = admit(policy, PODS["unrelated tolerations"])
    assert admitted["spec"]["tolerations"] == [*original, GPU_TOLERATION]


@pytest.mark.parametrize("name", ["identical toleration", "identical toleration without operator"])
def test_an_equivalent_toleration_already_present_is_not_duplicated(policy: dict[str, Any], name: str) -> None:
    admitted = admit(policy, PODS[name])
    assert admitted["spec"]["tolerations"] == PODS[name]["spec"]["tolerations"]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}


def test_an_empty_toleration_list_gets_the_gpu_toleration(policy: dict[str, Any]) -> None:
    assert admit(policy, PODS["empty tolerations"])["spec"]["tolerations"] == [GPU_TOLERATION]


def test_every_existing_required_term_is_extended_once_so_the_ored_terms_all_mean_gpu_nodes(
    policy: dict[str, Any],
) -> None:
    original = _required_terms(PODS["required terms"])
    terms = _required_terms(admit(policy, PODS["required terms"]))
    assert len(terms) == len(original)
    for before, after in zip(original, terms, strict=True):
        assert after["matchExpressions"] == [*before["matchExpressions"], GPU_EXPRESSION]


def test_a_term_that_already_requires_gpu_nodes_is_not_extended_again(policy: dict[str, Any]) -> None:
    terms = _required_terms(admit(policy, PODS["term already steered"]))
    assert terms[0]["matchExpressions"] == [GPU_EXPRESSION]
    assert terms[1]["matchExpressions"][-1] == GPU_EXPRESSION
    assert [e == GPU_EXPRESSION for term in terms for e in term["matchExpressions"]].count(True) == 2


def test_a_term_with_only_match_fields_gains_match_expressions_and_keeps_its_fields(policy: dict[str, Any]) -> None:
    original = _required_terms(PODS["term with only matchFields"])[0]
    term = _required_terms(admit(policy, PODS["term with only matchFields"]))[0]
    assert term == {"matchFields": original["matchFields"], "matchExpressions": [GPU_EXPRESSION]}


@pytest.mark.parametrize("name", ["empty term", "term with an empty expression list"])
def test_an_empty_term_which_matches_no_node_is_not_widened_to_every_gpu_node(
    policy: dict[str, Any], name: str
) -> None:
    original = _required_terms(PODS[name])
    terms = _required_terms(admit(policy, PODS[name]))
    assert terms[0] == original[0]
    for before, after in zip(original[1:], terms[1:], strict=True):
        assert after["matchExpressions"] == [*before["matchExpressions"], GPU_EXPRESSION]


def test_preferred_node_affinity_is_untouched_and_the_required_rule_is_added_beside_it(
    policy: dict[str, Any],
) -> None:
    original = PODS["preferred affinity only"]["spec"]["affinity"]["nodeAffinity"]
    node_affinity = admit(policy, PODS["preferred affinity only"])["spec"]["affinity"]["nodeAffinity"]
    assert (
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
        == original["preferredDuringSchedulingIgnoredDuringExecution"]
    )
    assert (
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        == GPU_NODE_AFFINITY["requiredDuringSchedulingIgnoredDuringExecution"]
    )


def test_pod_anti_affinity_is_kept_when_node_affinity_is_added(policy: dict[str, Any]) -> None:
    affinity = admit(policy, PODS["pod anti-affinity only"])["spec"]["affinity"]
    assert affinity == {**PODS["pod anti-affinity only"]["spec"]["affinity"], "nodeAffinity": GPU_NODE_AFFINITY}


@pytest.mark.parametrize("name", sorted(PODS))
def test_a_second_pass_as_on_webhook_reinvocation_changes_nothing(policy: dict[str, Any], name: str) -> None:
    once = admit(policy, PODS[name])
    assert admit(policy, once) == once


@pytest.mark.parametrize("namespace", [OPERATOR_NAMESPACE, "kube-system"])
def test_gpu_pods_in_excluded_namespaces_are_neither_sent_to_kyverno_nor_mutated(
    policy: dict[str, Any], namespace: str
) -> None:
    # The operator's validator pods request a GPU: a Kyverno outage must not block the operator itself.
    request = pod_request(PODS["gpu in a container"], namespace=namespace)
    assert not webhook_called(policy, request)
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_the_operator_namespace_is_excluded_even_when_the_config_omits_it() -> None:
    cfg = KyvernoConfig.model_validate({"excludedNamespaces": ["kube-system"]})
    policy = build_gpu_steering_policy(cfg, operator_namespace="nvidia-gpu")
    request = pod_request(PODS["gpu in a container"], namespace="nvidia-gpu")
    assert not webhook_called(policy, request)
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_an_update_is_never_mutated_because_pod_affinity_is_immutable(policy: dict[str, Any]) -> None:
    request = pod_request(PODS["gpu in a container"], operation="UPDATE")
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_the_configured_label_taint_and_resource_are_what_the_policy_adds() -> None:
    cfg = KyvernoConfig.model_validate(
        {
            "gpuNodeLabelKey": "example.org/accelerator",
            "gpuNodeLabelValue": "a1000",
            "taintKey": "example.org/gpu-only",
            "taintValue": "yes",
            "taintEffect": "NoExecute",
            "gpuResource": "example.org/gpu",
        }
    )
    policy = build_gpu_steering_policy(cfg, operator_namespace=OPERATOR_NAMESPACE)
    body = pod(container(resources={"limits": {"example.org/gpu": "1"}}))
    admitted = admit(policy, body)
    assert admitted["spec"]["tolerations"] == [
        {"key": "example.org/gpu-only", "operator": "Equal", "value": "yes", "effect": "NoExecute"}
    ]
    assert _required_terms(admitted) == [
        {"matchExpressions": [{"key": "example.org/accelerator", "operator": "In", "values": ["a1000"]}]}
    ]
    assert admit(policy, PODS["gpu in a container"]) == PODS["gpu in a container"]


# --------------------------------------------------------------------------------------------------------
# Policy settings
# --------------------------------------------------------------------------------------------------------


def test_every_rule_matches_pod_create_only(policy: dict[str, Any]) -> None:
    for rule in policy["spec"]["rules"]:
        assert rule["match"] == {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]}, rule["name"]


def test_autogen_is_off_so_deployments_and_jobs_are_not_rewritten(policy: dict[str, Any]) -> None:
    assert policy["metadata"]["annotations"][AUTOGEN_ANNOTATION] == "none"


def test_the_policy_runs_at_admission_only_and_fails_closed_by_default(policy: dict[str, Any]) -> None:
    assert policy["spec"]["background"] is False
    assert policy["spec"]["admission"] is True
    assert policy["spec"]["webhookConfiguration"]["failurePolicy"] == "Fail"
    assert policy["spec"]["webhookConfiguration"]["timeoutSeconds"] == 10


def test_failure_policy_and_timeout_come_from_the_config() -> None:
    cfg = KyvernoConfig.model_validate({"failurePolicy": "Ignore", "webhookTimeoutSeconds": 5})
    hook = build_gpu_steering_policy(cfg, operator_namespace=OPERATOR_NAMESPACE)["spec"]["webhookConfiguration"]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 5)


def test_the_policy_uses_json_patches_and_never_strategic_merge(policy: dict[str, Any]) -> None:
    text = yaml.safe_dump(policy)
    assert "patchStrategicMerge" not in text
    assert "patchesJson6902" in text


def test_the_policy_declares_its_title_description_and_minimum_kyverno_version(policy: dict[str, Any]) -> None:
    annotations = policy["metadata"]["annotations"]
    assert annotations["policies.kyverno.io/minversion"] == MINIMUM_KYVERNO_VERSION == "1.13.0"
    assert annotations["policies.kyverno.io/title"]
    assert "nvidia.com/gpu" in annotations["policies.kyverno.io/description"]
    assert policy["metadata"]["name"] == "gpu-pods-to-gpu-nodes"


# --------------------------------------------------------------------------------------------------------
# The model itself refuses what it does not implement
# --------------------------------------------------------------------------------------------------------


def test_the_model_refuses_a_kyverno_only_jmespath_function() -> None:
    with pytest.raises(jmespath.exceptions.UnknownFunctionError):
        resolve("{{ base64_decode('eA==') }}", {})


def test_the_model_refuses_an_operator_it_does_not_implement() -> None:
    with pytest.raises(UnsupportedConstruct):
        preconditions_pass({"all": [{"key": "a", "operator": "AnyIn", "value": ["a"]}]}, {})


def test_the_model_refuses_a_variable_that_resolves_to_null() -> None:
    with pytest.raises(UnresolvedVariable):
        resolve("{{ request.object.spec.tolerations }}", {"request": {"object": {"spec": {}}}})


def test_the_model_refuses_a_rule_field_it_does_not_implement(policy: dict[str, Any]) -> None:
    rule = {**policy["spec"]["rules"][0], "context": [{"name": "x", "variable": {"value": 1}}]}
    with pytest.raises(UnsupportedConstruct):
        apply_rule(rule, pod_request(PODS["gpu in a container"]), PODS["gpu in a container"])
