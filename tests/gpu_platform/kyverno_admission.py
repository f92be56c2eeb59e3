"""A small, strict model of the API server and Kyverno, for testing the generated ClusterPolicies.

The real Kyverno CLI runs in the e2e tier (tests/e2e/test_kyverno_*.py, which also hold this model to it); for
the fast suite, this is a small, strict model of the parts of Kyverno the policies use:
- the API server evaluates `webhookConfiguration.matchConditions` (CEL, with `celpy`) and only calls
  Kyverno when all are true;
- Kyverno matches each rule (kinds, operations, namespaces), resolves its `{{ }}` variables with JMESPath
  (`jmespath`, standard functions only), evaluates the preconditions, and applies `patchesJson6902`
  (`jsonpatch`), chaining rules so each sees the pod as the previous rule left it; `foreach` entries get
  `element` / `elementIndex` per list item;
- a `validate` rule with `deny.conditions` and `failureAction: Enforce` refuses the pod (after mutation, as the
  validating webhook sees it) with its message, whose `{{ }}` variables are substituted (a non-string as JSON).
Anything outside that subset raises `UnsupportedConstruct`, so the policy cannot drift into constructs the
model would silently misread.
"""

from __future__ import annotations

import copy
import json
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
    _only(resources, {"kinds", "operations", "namespaces", "names", "selector"}, "match/exclude resources")
    obj = request["object"]
    if "kinds" in resources and request["kind"]["kind"] not in resources["kinds"]:
        return False
    if "operations" in resources and request["operation"] not in resources["operations"]:
        return False
    if "namespaces" in resources and request["namespace"] not in resources["namespaces"]:
        return False
    # Exact names only: Kyverno also takes wildcards here, which gpu-pool never writes.
    if "names" in resources and (obj.get("metadata") or {}).get("name") not in resources["names"]:
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
    _only(rule, {"name", "match", "exclude", "preconditions", "mutate", "validate"}, f"rule {rule.get('name')}")
    if "validate" in rule:  # the mutating webhook runs mutate rules only
        return resource
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
        "oldObject": json_to_cel(request.get("oldObject")),
        "request": json_to_cel({k: v for k, v in request.items() if k not in ("object", "oldObject")}),
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


_ANY_VARIABLE = re.compile(r"\{\{\s*(.+?)\s*\}\}", re.DOTALL)


def substitute(text: str, context: dict[str, Any]) -> str:
    """A message: each embedded `{{ JMESPath }}` replaced by its result, a string as it is, anything else as JSON
    (Kyverno marshals a non-string; a whole number is a float64 there, which marshals without a decimal point)."""

    def one(match: re.Match[str]) -> str:
        result = jmespath.search(match.group(1), context)
        if result is None:
            raise UnresolvedVariable(f"{match.group(1)!r} resolved to null")
        if isinstance(result, float) and result.is_integer():
            result = int(result)
        return result if isinstance(result, str) else json.dumps(result)

    return _ANY_VARIABLE.sub(one, text)


def denials(policy: Mapping[str, Any], request: dict[str, Any]) -> list[str]:
    """Kyverno's validating side: the messages of the Enforce rules that deny the request's object."""
    _only(policy["spec"], {"admission", "background", "webhookConfiguration", "rules"}, "spec")
    messages = []
    for rule in policy["spec"]["rules"]:
        if "validate" not in rule or not rule_matches(rule, request):
            continue
        _only(rule, {"name", "match", "exclude", "preconditions", "validate"}, f"rule {rule.get('name')}")
        validate = rule["validate"]
        _only(validate, {"failureAction", "message", "deny"}, "validate")
        _only(validate["deny"], {"conditions"}, "validate.deny")
        context = _context(request, request["object"])
        if validate["failureAction"] != "Enforce":
            raise UnsupportedConstruct(f"failureAction {validate['failureAction']!r}")
        if preconditions_pass(rule.get("preconditions"), context) and preconditions_pass(
            validate["deny"]["conditions"], context
        ):
            messages.append(substitute(validate["message"], context))
    return messages


def refusal(policy: Mapping[str, Any], pod: dict[str, Any], *, namespace: str = "default") -> str | None:
    """Why the API server refuses the pod (the first denying rule's message), or None when the policy admits it."""
    request = pod_request(pod, namespace=namespace)
    if not webhook_called(policy, request):
        return None
    messages = denials(policy, request)
    return messages[0] if messages else None


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


def namespace_request(
    namespace: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "namespace": "",
        "object": namespace,
        "oldObject": old,
    }


def background_request(namespace: dict[str, Any]) -> dict[str, Any]:
    """The request Kyverno's background controller evaluates a policy's matchConditions with when it applies a
    generate rule to an existing trigger (generateExisting, a synchronize restore): the trigger as the object, no
    old object, an empty operation (v1.19.1 pkg/background/common/context.go, pkg/engine/internal/match.go)."""
    return namespace_request(namespace, operation="")


def quota_request(operation: str, quota: dict[str, Any] | None, old: dict[str, Any] | None) -> dict[str, Any]:
    namespace = (quota or old or {}).get("metadata", {}).get("namespace", "")
    return {
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": "ResourceQuota"},
        "namespace": namespace,
        "object": quota,
        "oldObject": old,
    }


def _generate_kinds(policy: Mapping[str, Any]) -> set[str]:
    """The kinds Kyverno's per-policy webhook covers: the rules' trigger kinds plus the kinds they generate
    (kyverno v1.13 pkg/controllers/webhook/controller.go, mergeWebhook)."""
    kinds: set[str] = set()
    for rule in policy["spec"]["rules"]:
        for block in rule["match"].get("any", []) + rule["match"].get("all", []):
            kinds |= set(block["resources"].get("kinds", []))
        if "generate" in rule:
            kinds.add(rule["generate"]["kind"])
    return kinds


def reaches_kyverno(policy: Mapping[str, Any], request: dict[str, Any]) -> bool:
    return request["kind"]["kind"] in _generate_kinds(policy) and webhook_called(policy, request)


def _downstream(policy: Mapping[str, Any], rule: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    generate = rule["generate"]
    data = generate["data"]
    context = {"request": {"object": {"metadata": {"name": namespace}}}}
    labels = {
        **data["metadata"]["labels"],
        "app.kubernetes.io/managed-by": "kyverno",
        "generate.kyverno.io/policy-name": policy["metadata"]["name"],
        "generate.kyverno.io/rule-name": rule["name"],
    }
    return {
        "apiVersion": generate["apiVersion"],
        "kind": generate["kind"],
        "metadata": {
            "name": resolve(generate["name"], context),
            "namespace": resolve(generate["namespace"], context),
            "labels": labels,
        },
        "spec": copy.deepcopy(data["spec"]),
    }


def _namespace_matches(rule: Mapping[str, Any], namespace: dict[str, Any] | None) -> bool:
    if namespace is None:
        return False
    return rule_matches(rule, namespace_request(namespace))


def generated(policy: Mapping[str, Any], namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """What Kyverno's background controller creates for one trigger namespace."""
    return [
        _downstream(policy, rule, namespace["metadata"]["name"])
        for rule in policy["spec"]["rules"]
        if _namespace_matches(rule, namespace)
    ]


class Cluster:
    """Namespaces and quotas, with a Kyverno that hears only what the API server sends its webhook.

    `synchronize: true` semantics (Kyverno 1.13+): a downstream object that is edited or deleted is put back,
    and it is deleted when its trigger no longer matches; both start from admission requests. Putting back and
    `generateExisting` happen in the background controller, which checks the matchConditions again
    (`background_request`).
    """

    def __init__(self, policy: Mapping[str, Any]) -> None:
        self.policy = policy
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.quotas: dict[tuple[str, str], dict[str, Any]] = {}
        self.sent: list[str] = []

    def _admit(self, request: dict[str, Any]) -> None:
        if not reaches_kyverno(self.policy, request):
            return
        self.sent.append(f"{request['operation']} {request['kind']['kind']}")
        if request["kind"]["kind"] == "Namespace":
            new, old = request["object"], request.get("oldObject")
            for rule in self.policy["spec"]["rules"]:
                name = new["metadata"]["name"]
                quota = _downstream(self.policy, rule, name)
                key = (name, quota["metadata"]["name"])
                if _namespace_matches(rule, new):
                    self.quotas[key] = quota
                elif _namespace_matches(rule, old) and rule["generate"].get("synchronize"):
                    self.quotas.pop(key, None)
            return
        old = request["oldObject"]
        labels = old["metadata"]["labels"]
        rule = next(r for r in self.policy["spec"]["rules"] if r["name"] == labels["generate.kyverno.io/rule-name"])
        namespace = self.namespaces.get(old["metadata"]["namespace"])
        # The background controller puts it back only if the policy applies to the trigger, which it decides by
        # the matchConditions too, on a request it builds itself (background_request).
        applies = namespace is not None and webhook_called(self.policy, background_request(namespace))
        if rule["generate"].get("synchronize") and _namespace_matches(rule, namespace) and applies:
            restored = _downstream(self.policy, rule, old["metadata"]["namespace"])
            self.quotas[(old["metadata"]["namespace"], restored["metadata"]["name"])] = restored

    def install_policy(self) -> None:
        """The policy created with namespaces already there: `generateExisting` in the background controller."""
        for namespace in self.namespaces.values():
            if not webhook_called(self.policy, background_request(namespace)):
                continue
            for rule in self.policy["spec"]["rules"]:
                if rule["generate"].get("generateExisting") and _namespace_matches(rule, namespace):
                    quota = _downstream(self.policy, rule, namespace["metadata"]["name"])
                    self.quotas[(namespace["metadata"]["name"], quota["metadata"]["name"])] = quota

    def put_namespace(self, name: str, labels: dict[str, str]) -> None:
        new = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}
        old = self.namespaces.get(name)
        self.namespaces[name] = new
        self._admit(namespace_request(new, "UPDATE" if old else "CREATE", old=old))

    def edit_quota(self, namespace: str, name: str, hard: dict[str, str]) -> None:
        old = self.quotas[(namespace, name)]
        new = copy.deepcopy(old)
        new["spec"]["hard"] = hard
        self.quotas[(namespace, name)] = new
        self._admit(quota_request("UPDATE", new, old))

    def delete_quota(self, namespace: str, name: str) -> None:
        old = self.quotas.pop((namespace, name))
        self._admit(quota_request("DELETE", None, old))
