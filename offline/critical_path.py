"""The critical path of a plan: the longest chain of custom resources Pulumi must create one after another.

Pulumi creates every resource as soon as what it waits for exists, so however many failure domains a stack
has, `pulumi up` takes about as long as its longest chain. Domains that are independent keep that chain the
same length at 3 and at 100 domains; one accidental cross-domain edge makes it grow with the pool.

What a resource waits for, as the Python SDK and the engine behave (pulumi/runtime/resource.py,
`prepare_resource`, and pulumi/runtime/rpc.py, `_add_dependency`):

* `dependsOn` in plan.json is what the SDK sent as the registration's dependencies: explicit `depends_on`
  plus every resource whose outputs feed an input. The SDK awaits each one's URN, and a custom resource's URN
  only comes back once the engine has created it, so each is an ordering edge.
* A dependency on a local component never reaches the engine as the component: the SDK replaces it with the
  component's children, descending through child components but not into the children of a custom resource.
  A plan that still names a component (a remote component, or a hand-made plan) is expanded the same way here.
* `parent` is an ordering edge too, and a subtle one: the SDK awaits the parent's URN before it registers the
  child. A custom parent's URN arrives when the parent has been created, so a child of a custom resource waits
  for it. A component's URN arrives as soon as the component itself is registered, which is after *its* own
  dependencies and parent: children of a component do not wait for their siblings, but they do inherit the
  component's `depends_on` and its inputs' dependencies.
* Providers are created too, but plan.json does not say which resource uses which provider and a provider is
  a configuration step, not infrastructure. They are left out of chains; a dependency on a provider stands for
  whatever that provider itself waits for, as a dependency on a component does.

Component resources and providers are not counted in a chain: only custom resources take time to create.
plan.json (offline/render.py) does not carry the SDK's `custom` flag, so a resource is taken as:
a provider when its type is `pulumi:providers:*`; custom or not as its `custom` key says when the plan has
one; otherwise a component when its type's package is the project's own (`gpu-pool:...`: a program's
components live in its own namespace, custom resources come from provider packages) or when it is the parent
of other resources while registering no inputs (what a `ComponentResource` sends).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["custom", "component", "provider"]
PROVIDER_PREFIX = "pulumi:providers:"


class PlanGraphError(ValueError):
    pass


@dataclass(frozen=True)
class _Node:
    urn: str
    type: str
    name: str
    parent: str
    depends_on: tuple[str, ...]
    kind: Kind


def _package(type_token: str) -> str:
    return type_token.split(":", 1)[0]


def _nodes(plan: Mapping[str, Any]) -> dict[str, _Node]:
    resources: Sequence[Mapping[str, Any]] = plan.get("resources") or []
    project = str(plan.get("project") or "")
    parents = {str(r.get("parent") or "") for r in resources}
    nodes: dict[str, _Node] = {}
    for resource in resources:
        urn = str(resource["urn"])
        type_token = str(resource["type"])
        kind: Kind
        if type_token.startswith(PROVIDER_PREFIX):
            kind = "provider"
        elif isinstance(resource.get("custom"), bool):
            kind = "custom" if resource["custom"] else "component"
        elif (project and _package(type_token) == project) or (urn in parents and not resource.get("inputs")):
            kind = "component"
        else:
            kind = "custom"
        nodes[urn] = _Node(
            urn=urn,
            type=type_token,
            name=str(resource["name"]),
            parent=str(resource.get("parent") or ""),
            depends_on=tuple(str(d) for d in resource.get("dependsOn") or []),
            kind=kind,
        )
    return nodes


def _children(nodes: Mapping[str, _Node]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for node in nodes.values():
        if node.parent in nodes:
            children.setdefault(node.parent, []).append(node.urn)
    return children


def _component_members(urn: str, nodes: Mapping[str, _Node], children: Mapping[str, list[str]]) -> set[str]:
    """What depending on a component means: its children, through child components, not below custom ones."""
    members: set[str] = set()
    pending = [urn]
    seen = {urn}
    while pending:
        for child in children.get(pending.pop(), []):
            if child in seen:
                continue
            seen.add(child)
            if nodes[child].kind == "component":
                pending.append(child)
            else:
                members.add(child)
    return members


def _waits_for(nodes: Mapping[str, _Node]) -> dict[str, set[str]]:
    """Each resource's direct prerequisites (any kind), as the SDK awaits them before registering it."""
    children = _children(nodes)
    waits: dict[str, set[str]] = {}
    for node in nodes.values():
        direct: set[str] = set()
        for dependency in node.depends_on:
            if dependency not in nodes:
                continue  # the stack resource, or a resource of another stack: created already
            if nodes[dependency].kind == "component":
                direct |= _component_members(dependency, nodes, children)
            else:
                direct.add(dependency)
        if node.parent in nodes:
            direct.add(node.parent)
        direct.discard(node.urn)
        waits[node.urn] = direct
    return waits


def _custom_predecessors(nodes: Mapping[str, _Node]) -> dict[str, set[str]]:
    """For every resource, the custom resources it waits for, seeing through components and providers."""
    waits = _waits_for(nodes)
    resolved: dict[str, set[str]] = {}
    on_stack: set[str] = set()
    for start in sorted(nodes):
        if start in resolved:
            continue
        # Iterative depth-first walk: deep plans must not hit Python's recursion limit.
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            urn, expanded = stack.pop()
            if expanded:
                on_stack.discard(urn)
                result: set[str] = set()
                for prerequisite in waits[urn]:
                    if nodes[prerequisite].kind == "custom":
                        result.add(prerequisite)
                    else:
                        result |= resolved[prerequisite]
                resolved[urn] = result
                continue
            if urn in resolved:
                continue
            if urn in on_stack:
                raise PlanGraphError(f"dependency cycle through {nodes[urn].name} ({nodes[urn].type})")
            on_stack.add(urn)
            stack.append((urn, True))
            for prerequisite in sorted(waits[urn]):
                if prerequisite in on_stack:
                    raise PlanGraphError(
                        f"dependency cycle through {nodes[prerequisite].name} ({nodes[prerequisite].type})"
                    )
                if prerequisite not in resolved:
                    stack.append((prerequisite, False))
    return resolved


def _chain(plan: Mapping[str, Any]) -> list[_Node]:
    nodes = _nodes(plan)
    predecessors = _custom_predecessors(nodes)
    customs = [urn for urn, node in nodes.items() if node.kind == "custom"]
    depth: dict[str, int] = {}
    # Longest path in a DAG: give each custom its depth once all its predecessors have theirs (Kahn's order).
    remaining = {urn: set(predecessors[urn]) for urn in customs}
    successors: dict[str, list[str]] = {urn: [] for urn in customs}
    for urn in customs:
        for predecessor in remaining[urn]:
            successors[predecessor].append(urn)
    ready = sorted(urn for urn in customs if not remaining[urn])
    while ready:
        urn = ready.pop()
        depth[urn] = 1 + max((depth[p] for p in predecessors[urn]), default=0)
        for successor in successors[urn]:
            remaining[successor].discard(urn)
            if not remaining[successor]:
                ready.append(successor)
    if not depth:
        return []

    # Ties broken by type, then name: the same role is picked whether the stack has 3 domains or 100.
    def key(urn: str) -> tuple[str, str, str]:
        return (nodes[urn].type, nodes[urn].name, urn)

    end = min(depth, key=lambda urn: (-depth[urn], *key(urn)))
    chain = [end]
    while depth[chain[-1]] > 1:
        current = chain[-1]
        chain.append(min((p for p in predecessors[current] if depth[p] == depth[current] - 1), key=key))
    return [nodes[urn] for urn in reversed(chain)]


def critical_path(plan: Mapping[str, Any]) -> list[str]:
    """Names of the custom resources on the longest creation chain of a plan.json, first created first."""
    return [node.name for node in _chain(plan)]


def critical_path_length(plan: Mapping[str, Any]) -> int:
    """How many custom resources must be created one after another (0 for a plan without any)."""
    return len(_chain(plan))


def critical_path_shape(plan: Mapping[str, Any]) -> list[str]:
    """Resource types along the critical path: `dc1-vm` and `dc57-vm` are the same step of the chain."""
    return [node.type for node in _chain(plan)]


def cross_component_waits(plan: Mapping[str, Any], component_type: str) -> list[tuple[str, str]]:
    """(waiter, waited-for) pairs of custom resources in different components of `component_type` (e.g. two
    failure domains): the waits that serialise domains. A first install should have none."""
    nodes = _nodes(plan)
    predecessors = _custom_predecessors(nodes)

    def owner(urn: str) -> str | None:
        parent = nodes[urn].parent
        while parent in nodes:
            if nodes[parent].type == component_type:
                return parent
            parent = nodes[parent].parent
        return None

    pairs: list[tuple[str, str]] = []
    for urn, node in nodes.items():
        if node.kind != "custom" or owner(urn) is None:
            continue
        for before in predecessors[urn]:
            if owner(before) is not None and owner(before) != owner(urn):
                pairs.append((node.name, nodes[before].name))
    return sorted(pairs)
