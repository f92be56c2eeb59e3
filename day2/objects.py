"""Reading Kubernetes objects as plain dicts (a `kubectl -o json` dump or the client's sanitized objects)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from knowledge.kubernetes import HOSTNAME_LABEL

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """The kinds the tool reads, as `kubectl get nodes,pods,configmaps,jobs -A -o json` lists them; Namespaces
    (their Kubeflow profile owner) only where the dump or the live read includes them (`claims --usage`), Kubeflow
    Notebooks and ResourceQuotas where they are asked for (`claims --reclaimable`)."""

    nodes: tuple[JsonObject, ...] = ()
    pods: tuple[JsonObject, ...] = ()
    configmaps: tuple[JsonObject, ...] = ()
    jobs: tuple[JsonObject, ...] = ()
    namespaces: tuple[JsonObject, ...] = ()
    notebooks: tuple[JsonObject, ...] = ()
    quotas: tuple[JsonObject, ...] = ()

    @classmethod
    def from_items(cls, items: Iterable[JsonObject]) -> Snapshot:
        by_kind: dict[str, list[JsonObject]] = {
            "Node": [],
            "Pod": [],
            "ConfigMap": [],
            "Job": [],
            "Namespace": [],
            "Notebook": [],
            "ResourceQuota": [],
        }
        for item in items:
            kind = item.get("kind")
            if isinstance(kind, str) and kind in by_kind:
                by_kind[kind].append(item)
        return cls(
            nodes=tuple(by_kind["Node"]),
            pods=tuple(by_kind["Pod"]),
            configmaps=tuple(by_kind["ConfigMap"]),
            jobs=tuple(by_kind["Job"]),
            namespaces=tuple(by_kind["Namespace"]),
            notebooks=tuple(by_kind["Notebook"]),
            quotas=tuple(by_kind["ResourceQuota"]),
        )


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("metadata"))


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("spec"))


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("status"))


def name(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("name", ""))


def namespace(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("namespace", ""))


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in _map(metadata(obj).get("labels")).items()}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in _map(metadata(obj).get("annotations")).items()}


def finalizers(obj: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(f) for f in _list(metadata(obj).get("finalizers")))


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it ("...Z") or the Python client ("...+00:00")."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [_map(c) for c in _list(status(obj).get("conditions"))]


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions(obj) if c.get("type") == kind), None)


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def containers(pod: Mapping[str, Any], key: str = "containers") -> list[Mapping[str, Any]]:
    """`containers` or `initContainers` of a pod spec."""
    return [_map(c) for c in _list(spec(pod).get(key))]


def container_statuses(pod: Mapping[str, Any], key: str = "containerStatuses") -> list[Mapping[str, Any]]:
    """`containerStatuses` or `initContainerStatuses`."""
    return [_map(c) for c in _list(status(pod).get(key))]


def resources(container: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """A container's `limits` or `requests`."""
    return _map(_map(container.get("resources")).get(kind))


def owner_references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [_map(o) for o in _list(metadata(obj).get("ownerReferences"))]


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference marked `controller: true`, else the first one."""
    owners = owner_references(obj)
    return next((o for o in owners if o.get("controller") is True), owners[0] if owners else None)


def bound_node(pod: Mapping[str, Any]) -> str | None:
    node = spec(pod).get("nodeName")
    return str(node) if node else None


def intended_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod is bound to, or the one a DaemonSet pod is meant for while it is still Pending.

    The DaemonSet controller pins each pod with a required node affinity on the field `metadata.name`.
    """
    if bound := bound_node(pod):
        return bound
    required = _map(
        _map(_map(spec(pod).get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    for term in _list(required.get("nodeSelectorTerms")):
        for raw in _list(_map(term).get("matchFields")):
            field = _map(raw)
            values = _list(field.get("values"))
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def node_selector_hostname(template_spec: Mapping[str, Any]) -> str | None:
    """The node a pod template is pinned to with `nodeSelector: {kubernetes.io/hostname: <node>}`."""
    value = _map(template_spec.get("nodeSelector")).get(HOSTNAME_LABEL)
    return str(value) if value else None


def job_template_spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(spec(job).get("template")).get("spec"))


def taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [_map(t) for t in _list(spec(node).get("taints"))]


def allocatable(node: Mapping[str, Any], resource: str) -> str | None:
    value = _map(status(node).get("allocatable")).get(resource)
    return None if value is None else str(value)


def newest(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently created object: by creationTimestamp, which has whole seconds only, so two objects created
    in the same second (a pod recreated at once, two Jobs applied together) by when they started, then by name."""
    epoch = datetime.fromtimestamp(0).astimezone()
    dated = [
        (
            parse_time(metadata(o).get("creationTimestamp")) or epoch,
            parse_time(status(o).get("startTime")) or epoch,
            name(o),
            o,
        )
        for o in objects
    ]
    if not dated:
        return None
    return max(dated, key=lambda item: item[:3])[3]
