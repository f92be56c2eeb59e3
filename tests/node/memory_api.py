"""An API server in memory, as node/kube.py's Transport: objects by path, a resourceVersion each (a write carrying an
older one is 409, as the API server answers), merge and strategic merge patches, lists with field and label
selectors, evictions (a PodDisruptionBudget's 429 scripted per pod), Events, Jobs that end as a test says, pod
logs. Every request is recorded; `authorize` (the watcher's derived RBAC) answers 403 for what it refuses; `faults`
scripts answers or connection errors for the next requests matching a method and a path prefix.

`MemoryApi.state()` / `MemoryApi.of_state()` round-trip it through JSON, for a stand-in kubectl in another process
(tests/node/fake_kubectl.py)."""

from __future__ import annotations

import copy
import itertools
import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node.kube import MERGE, STRATEGIC, Answer, Unreachable


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def strategic(target: Any, patch: Any) -> Any:
    """A strategic merge patch as the API server applies one to a Node's status: `conditions` merged by `type`."""
    result = merge(target, {k: v for k, v in patch.items() if k != "status"}) if isinstance(patch, dict) else patch
    status = (patch or {}).get("status") if isinstance(patch, dict) else None
    if status:
        current = dict(result.get("status") or {})
        for key, value in status.items():
            if key == "conditions":
                by_type = {c.get("type"): c for c in current.get("conditions") or []}
                for condition in value:
                    by_type[condition.get("type")] = {**by_type.get(condition.get("type"), {}), **condition}
                current["conditions"] = list(by_type.values())
            else:
                current[key] = merge(current.get(key), value)
        result["status"] = current
    return result


def _parsed(path: str) -> tuple[str, str | None, str, str] | None:
    """(api prefix, namespace, resource, name) of `/api/v1/...` or `/apis/<group>/<version>/...` ('' name: a list)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        api, rest = "/".join(parts[:2]), parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        api, rest = "/".join(parts[:3]), parts[3:]
    else:
        return None
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 2:
        return None
    return api, namespace, rest[0], rest[1] if len(rest) == 2 else ""


def _labels_match(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


@dataclass
class Fault:
    """The next `times` requests of `method` whose path starts with `prefix` get `status` (None: no answer)."""

    method: str
    prefix: str
    status: int | None = 503
    times: int = 1
    sent: bool = True
    retry_after: float | None = None


@dataclass
class MemoryApi:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    # Pod name -> how many evictions a PodDisruptionBudget refuses (429) before it lets one through.
    pdb_refusals: dict[str, int] = field(default_factory=dict)
    # GET path -> merge patches applied at each following GET, one each (the last one stays): a node that reboots.
    sequences: dict[str, list[dict[str, Any] | None]] = field(default_factory=dict)
    version: int = 1
    authorize: Callable[[str, str], bool] | None = None
    # Called with each Job created (its path and body): a test makes it end (job_status) and leave a log.
    on_job: Callable[[MemoryApi, str, dict[str, Any]], None] | None = None
    names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        for obj in self.objects.values():
            obj.setdefault("metadata", {}).setdefault("resourceVersion", "1")

    # ------------------------------------------------------------------------------------------------ state

    def state(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "events": self.events,
            "logs": self.logs,
            "pdb_refusals": self.pdb_refusals,
            "sequences": self.sequences,
            "version": self.version,
            "requests": self.requests,
            "faults": [f.__dict__ for f in self.faults],
        }

    @classmethod
    def of_state(cls, state: dict[str, Any]) -> MemoryApi:
        api = cls(
            objects=state["objects"],
            events=state.get("events", []),
            logs=state.get("logs", {}),
            pdb_refusals=state.get("pdb_refusals", {}),
            sequences=state.get("sequences", {}),
            version=state.get("version", 1),
            requests=[(str(r[0]), str(r[1])) for r in state.get("requests", [])],
            faults=[Fault(**f) for f in state.get("faults", [])],
        )
        return api

    def node(self, name: str) -> dict[str, Any]:
        return self.objects[f"/api/v1/nodes/{name}"]

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self._bump(path, copy.deepcopy(obj))

    def _bump(self, path: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    # ------------------------------------------------------------------------------------------------ requests

    def _fault(self, method: str, path: str) -> Answer | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method == method and path.startswith(fault.prefix):
                fault.times -= 1
                if fault.status is None:
                    raise Unreachable("connection refused" if not fault.sent else "connection reset", fault.sent)
                body = json.dumps({"message": f"injected {fault.status}"}).encode()
                return Answer(fault.status, body, fault.retry_after, "Injected")
        return None

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        self.requests.append((method, path))
        injected = self._fault(method, path)
        if injected is not None:
            return injected
        if self.authorize is not None and not self.authorize(method, path):
            return self._error(403, "Forbidden", f"{method} {path} is not in the Roles")
        data = json.loads(body) if body else None
        base, _, query = path.partition("?")
        try:
            if method == "GET":
                return self._get(base, dict(urllib.parse.parse_qsl(query)))
            if method == "POST":
                return self._post(base, data or {})
            if method == "DELETE":
                if self.objects.pop(base, None) is None:
                    return self._error(404, "NotFound", f"{base} not found")
                return Answer(200, b"{}")
            return self._write(method, base, data or {}, content_type)
        except KeyError as error:
            return self._error(404, "NotFound", f"{error} not found")

    @staticmethod
    def _error(status: int, reason: str, message: str) -> Answer:
        return Answer(status, json.dumps({"message": message, "reason": reason}).encode(), None, reason)

    def _ok(self, obj: Any) -> Answer:
        return Answer(200, json.dumps(obj).encode())

    def _get(self, path: str, query: dict[str, str]) -> Answer:
        if path.endswith("/log"):
            if path not in self.logs:
                return self._error(404, "NotFound", path)
            return Answer(200, self.logs[path].encode())
        if self.sequences.get(path):
            # What the cluster reports changes under the reader (a node that registers, reboots): merged in, what
            # was written kept; None: the object is not there (yet).
            states = self.sequences[path]
            change = states[0] if len(states) == 1 else states.pop(0)
            if change is None:
                self.objects.pop(path, None)
            else:
                self.objects[path] = merge(self.objects.get(path) or {"metadata": {"resourceVersion": "1"}}, change)
        if path in self.objects:
            return self._ok(self.objects[path])
        listed = self._list(path, query)
        if listed is None:
            return self._error(404, "NotFound", f"{path} not found")
        return self._ok({"kind": "List", "items": listed})

    def _list(self, path: str, query: dict[str, str]) -> list[dict[str, Any]] | None:
        collection = _parsed(path)
        if collection is None or collection[3]:
            return None
        api, namespace, resource, _ = collection
        found = []
        for key, obj in sorted(self.objects.items()):
            parsed = _parsed(key)
            if parsed is None or not parsed[3] or (parsed[0], parsed[2]) != (api, resource):
                continue
            if namespace is None or parsed[1] == namespace:
                found.append(obj)
        wanted = query.get("fieldSelector", "")
        if wanted.startswith("spec.nodeName="):
            found = [o for o in found if (o.get("spec") or {}).get("nodeName") == wanted.split("=", 1)[1]]
        label = query.get("labelSelector", "")
        if label:
            found = [o for o in found if _labels_match((o.get("metadata") or {}).get("labels") or {}, label)]
        return [copy.deepcopy(o) for o in found]

    def _post(self, path: str, data: dict[str, Any]) -> Answer:
        if path.endswith("/eviction"):
            pod_path = path.removesuffix("/eviction")
            name = pod_path.rsplit("/", 1)[1]
            if pod_path not in self.objects:
                return self._error(404, "NotFound", f"pods {name} not found")
            if self.pdb_refusals.get(name, 0) > 0:
                self.pdb_refusals[name] -= 1
                return self._error(
                    429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
                )
            self.objects.pop(pod_path)
            return self._ok({"kind": "Status", "status": "Success"})
        meta = data.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', 'x-')}{next(self.names)}"
        target = f"{path}/{meta['name']}"
        if path.endswith("/events"):
            self.events.append(data)
            return self._ok(data)
        if target in self.objects:
            return self._error(409, "AlreadyExists", f"{target} already exists")
        self._bump(target, copy.deepcopy(data))
        if path.endswith("/jobs") and self.on_job is not None:
            self.on_job(self, target, self.objects[target])
        return self._ok(self.objects[target])

    def _write(self, method: str, path: str, data: dict[str, Any], content_type: str) -> Answer:
        target = path.removesuffix("/status")
        current = self.objects.get(target)
        if current is None:
            return self._error(404, "NotFound", f"{target} not found")
        sent = ((data or {}).get("metadata") or {}).get("resourceVersion")
        if sent is not None and str(sent) != current["metadata"]["resourceVersion"]:
            return self._error(409, "Conflict", "the object has been modified; please apply your changes")
        if method == "PUT":
            updated = copy.deepcopy(data)
        elif content_type == STRATEGIC:
            updated = strategic(current, data)
        elif content_type == MERGE:
            updated = merge(current, data)
        else:
            return self._error(415, "UnsupportedMediaType", content_type)
        self._bump(target, updated)
        return self._ok(self.objects[target])


def job_status(outcome: str) -> dict[str, Any]:
    return {"conditions": [{"type": outcome, "status": "True"}]}
