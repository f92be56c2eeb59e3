"""The watcher's Kubernetes RBAC, derived from the repair turn's steps: every kubectl call a step makes (the node-steps
script's functions, read from its source, and the drain's shell command) is looked up in KUBECTL_API, the API
requests that kubectl command makes, and the rules are the union of those requests, nothing else.

A step that starts to use a kubectl command KUBECTL_API does not know fails `uses_of` (and so its test), and a rule
no step asks for cannot appear, because the rules are built from the uses. Nodes: get and patch only, limited by
`resourceNames` to the stack's hostnames.

What kubectl requests for a command (kubectl v1.33, k8s.io/kubectl): `get <kind> <name>` GETs it and `get <kind>`
with a selector LISTs; `label`/`patch`/`uncordon` GET then PATCH the node (pkg/cmd/label, pkg/drain/cordon.go);
`drain` cordons (GET, PATCH the node), LISTs the pods on it across namespaces (pkg/drain/drain.go GetPodsForDeletion,
fieldSelector spec.nodeName), GETs each pod's DaemonSet for --ignore-daemonsets (pkg/drain/filters.go), creates an
Eviction per pod (pods/eviction) and GETs each pod until it is gone (waitForDelete); `create -f -` POSTs the object.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One API request: (apiGroup, resource, verb, scope). Scope: "node" (the stack's Node, by resourceNames),
# "cluster" (any namespace), or the name of the namespace setting it lives in ("operator", "smoke", "events").
Request = tuple[str, str, str, str]

_NODE_GET: Request = ("", "nodes", "get", "node")
_NODE_PATCH: Request = ("", "nodes", "patch", "node")

# A kubectl command's first words (namespace flags dropped) -> the requests it makes. `create -f -` is named by
# the function that sends it, since its kind is in the object on stdin.
KUBECTL_API: Mapping[tuple[str, ...], tuple[Request, ...]] = {
    ("get", "node"): (_NODE_GET,),
    ("annotate", "node"): (_NODE_GET, _NODE_PATCH),
    ("patch", "node"): (_NODE_GET, _NODE_PATCH),
    ("label", "node"): (_NODE_GET, _NODE_PATCH),
    ("uncordon",): (_NODE_GET, _NODE_PATCH),
    ("drain",): (
        _NODE_GET,
        _NODE_PATCH,
        ("", "pods", "list", "cluster"),
        ("", "pods", "get", "cluster"),
        ("apps", "daemonsets", "get", "cluster"),
        ("", "pods/eviction", "create", "cluster"),
    ),
    ("get", "pods"): (("", "pods", "list", "operator"),),
    ("get", "daemonset"): (("apps", "daemonsets", "get", "operator"),),
    ("get", "controllerrevisions"): (("apps", "controllerrevisions", "list", "operator"),),
    ("delete", "pod"): (("", "pods", "delete", "operator"),),
    ("get", "job"): (("batch", "jobs", "get", "smoke"),),
    ("create", "-f", "post_event"): (("", "events", "create", "events"),),
    ("create", "-f", "step_smoke_test"): (("batch", "jobs", "create", "smoke"),),
}
# Node Events go to `default`, as the kubelet's own (node_steps_script.post_event).
EVENTS_NAMESPACE = "default"


@dataclass(frozen=True)
class Use:
    step: str
    where: str
    words: tuple[str, ...]


def _literal_words(args: Sequence[ast.expr]) -> list[str | None]:
    return [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in args]


def _key(words: Sequence[str | None], function: str) -> tuple[str, ...]:
    rest = list(words)
    if rest[:1] == ["-n"]:
        rest = rest[2:]
    first = [w for w in rest[:2] if w is not None]
    if first[:1] == ["create"]:
        return ("create", "-f", function)
    if first[:1] in (["drain"], ["uncordon"]):
        return (first[0],)
    return tuple(first[:2])


def script_uses(source: str, steps: Mapping[str, str]) -> list[Use]:
    """Every kubectl call each script step makes (`STEPS[step]` and the module's functions it calls, transitively)."""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    uses: list[Use] = []
    for step, entry in steps.items():
        seen: set[str] = set()
        todo = [entry]
        while todo:
            name = todo.pop()
            if name in seen or name not in functions:
                continue
            seen.add(name)
            for node in ast.walk(functions[name]):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Name) and func.id in functions:
                    todo.append(func.id)
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "kubectl"
                    and func.attr in ("json", "must", "run")
                ):
                    words = _literal_words(node.args)
                    uses.append(Use(step, f"{name}:{node.lineno}", _key(words, name)))
    return uses


_SHELL_KUBECTL = re.compile(r"kubectl\s+((?:-n\s+\S+\s+)?)([a-z-]+)(?:\s+([a-z-]+))?")
# A single-quoted word is data, never run: the advice a stopped drain writes on the Node names kubectl commands.
_SINGLE_QUOTED = re.compile(r"'[^']*'")


def shell_uses(step: str, command: str) -> list[Use]:
    """Every kubectl call in a step's shell command."""
    uses = []
    for match in _SHELL_KUBECTL.finditer(_SINGLE_QUOTED.sub("''", command)):
        verb, kind = match.group(2), match.group(3)
        key = (verb,) if verb in ("drain", "uncordon") else (verb, kind or "")
        uses.append(Use(step, "shell", key))
    return uses


def requests_of(uses: Iterable[Use]) -> tuple[set[Request], list[Use]]:
    """The API requests of the uses, and the uses KUBECTL_API does not know (a test fails on any)."""
    found: set[Request] = set()
    unknown: list[Use] = []
    for use in uses:
        known = KUBECTL_API.get(use.words)
        if known is None:
            unknown.append(use)
        else:
            found |= set(known)
    return found, unknown


def rules(
    requests: Iterable[Request], hostnames: Sequence[str], namespaces: Mapping[str, str]
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(ClusterRole rules, Role rules by namespace) for the requests: verbs grouped per group and resource, the
    Node's limited to `hostnames`."""
    cluster: dict[tuple[str, str], set[str]] = {}
    node: set[str] = set()
    spaced: dict[str, dict[tuple[str, str], set[str]]] = {}
    for group, resource, verb, scope in requests:
        if scope == "node":
            node.add(verb)
        elif scope == "cluster":
            cluster.setdefault((group, resource), set()).add(verb)
        else:
            spaced.setdefault(namespaces[scope], {}).setdefault((group, resource), set()).add(verb)

    def as_rules(grouped: Mapping[tuple[str, str], set[str]]) -> list[dict[str, Any]]:
        return [
            {"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
            for (group, resource), verbs in sorted(grouped.items())
        ]

    cluster_rules = as_rules(cluster)
    if node:
        cluster_rules.append(
            {"apiGroups": [""], "resources": ["nodes"], "resourceNames": sorted(hostnames), "verbs": sorted(node)}
        )
    return cluster_rules, {ns: as_rules(grouped) for ns, grouped in sorted(spaced.items())}


def script_source() -> str:
    return (Path(__file__).resolve().parents[1] / "gpu_failure_domain" / "node_steps_script.py").read_text("utf-8")


def script_steps(source: str) -> dict[str, str]:
    """`STEPS` of the node-steps script: step name -> the function it runs."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "STEPS":
                return {
                    str(k.value): v.id
                    for k, v in zip(node.value.keys, node.value.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Name)
                }
    raise ValueError("the node-steps script has no STEPS table")


def turn_uses(stack: Any) -> list[Use]:
    """Every kubectl call of the repair turn the watcher runs, planned as `gpu-pool repair` plans it."""
    import json

    from components.gpu_failure_domain.observed import ObservedNode
    from components.gpu_failure_domain.plan import plan_domain
    from components.gpu_failure_domain.turns import repair_turn

    source = script_source()
    steps = script_steps(source)
    domain = stack.failure_domains[0]
    turn = repair_turn(domain, ObservedNode(rollout={}), "node:pci: planned for RBAC", "2026-01-01T00:00:00Z")
    plan = plan_domain(domain, stack, turn, holder="repair:unattended@rbac")
    uses: list[Use] = []
    for step in plan.turn_steps():
        command = getattr(step, "command", None)
        if command is None:
            continue
        environment = command.environment
        env = json.loads(environment.replace("'", '"')) if isinstance(environment, str) else dict(environment or {})
        script_step = env.get("GPU_POOL_STEP")
        if script_step:
            uses += [Use(step.name, u.where, u.words) for u in script_uses(source, {script_step: steps[script_step]})]
        else:
            uses += shell_uses(step.name, command.create or "")
    return uses


def watcher_rules(stack: Any) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The repair turn's RBAC for this stack; a kubectl use KUBECTL_API does not know is an error, never a guess."""
    requests, unknown = requests_of(turn_uses(stack))
    if unknown:
        listed = ", ".join(f"{u.step} {' '.join(u.words)} ({u.where})" for u in unknown)
        raise ValueError(f"the repair turn uses kubectl commands with no RBAC entry (KUBECTL_API): {listed}")
    namespaces = {
        "operator": stack.gpu_operator.namespace,
        "smoke": stack.smoke_test.namespace,
        "events": EVENTS_NAMESPACE,
    }
    return rules(requests, [d.hostname for d in stack.failure_domains], namespaces)
