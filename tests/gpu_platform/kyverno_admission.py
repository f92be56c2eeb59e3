"""A small, strict model of the API server and Kyverno, for testing the generated ClusterPolicies.

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
import yaml
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType

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


def namespace_request(namespace: dict[str, Any] | None, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "namespace": "",
        "object": namespace,
    }


def generated(policy: Mapping[str, Any], namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """What Kyverno's background controller creates for one trigger namespace."""
    request = namespace_request(namespace)
    context = {"request": request}
    made = []
    for rule in policy["spec"]["rules"]:
        if not rule_matches(rule, request):
            continue
        generate = rule["generate"]
        data = generate["data"]
        made.append(
            {
                "apiVersion": generate["apiVersion"],
                "kind": generate["kind"],
                "metadata": {
                    **data["metadata"],
                    "name": resolve(generate["name"], context),
                    "namespace": resolve(generate["namespace"], context),
                },
                "spec": data["spec"],
            }
        )
    return made
