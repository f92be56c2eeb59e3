"""The one Kubernetes client: `Kube` over a transport, kubectl (where `pulumi up` and `gpu-pool repair` run, with the
stack's kubeconfig and context) or REST (in a pod, with its ServiceAccount's token and CA).

The interface, by API path (`/api/v1/nodes/n1`, `/apis/batch/v1/namespaces/ns/jobs`), JSON in and out:

    kube.get(path) -> dict | None            # None: 404
    kube.list(path, kind) -> list[dict]      # each item with its `kind` set
    kube.text(path) -> str                   # a pod's log
    kube.create(path, body) -> dict          # POST
    kube.update(path, body) -> dict          # PUT (carrying the resourceVersion read: 409 when it changed)
    kube.patch(path, patch, MERGE | STRATEGIC) -> dict
    kube.delete(path) -> None                # 404 is done already
    kube.node(name) / kube.patch_node(name, change) / kube.event(...)

Errors are ApiError (its `status`: the HTTP status, None when the API server did not answer), Conflict for a 409.
Retries are client-go's manners (k8s.io/client-go rest/with_retry.go, request.go): a 429 or a 5xx that carries
`Retry-After` is sent again after that many seconds, for every verb (the server did not act on it); a request the
server never received (connection refused) is sent again for every verb; any other error of a read (a reset, a
timeout, a 5xx) is sent again, since a GET changes nothing; after the server's Retry-After or a second, at most
MAX_RETRIES times.
A wait (node/waiting.py) treats what is left of an API error as "not yet" until its own deadline.

The kubectl transport maps each request onto kubectl (`get --raw`, `create --raw -f -`, `replace --raw -f -`,
`delete --raw`, and `patch <resource> <name> --type` from the path, since kubectl has no raw PATCH); kubectl
itself retries 429s, and its `Error from server (Reason)` line is read back as the status.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from node.vocabulary import resource_version, stamp

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON = "application/json"
# client-go's default (rest.Request maxRetries) and the longest pause this client waits between two sends.
MAX_RETRIES = 10
MAX_PAUSE_SECONDS = 30.0
ERROR_PAUSE_SECONDS = 1.0
REQUEST_TIMEOUT_SECONDS = 60
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# How often a conditional patch is made again when the Node changed in between (the kubelet's status moves it).
CONFLICT_ATTEMPTS = 10


class ApiError(Exception):
    """A request the API server refused (`status`) or did not answer (`status` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Conflict(ApiError):
    """409: the object changed since it was read (its resourceVersion), or it exists already."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    # The `Retry-After` header in seconds (None: none sent).
    retry_after: float | None = None
    reason: str = ""


class Unreachable(Exception):
    """The request got no answer; `sent` False when it never reached the server (connection refused)."""

    def __init__(self, reason: str, sent: bool) -> None:
        super().__init__(reason)
        self.sent = sent


class Transport(Protocol):
    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        """One request as sent; an answer of any status, or Unreachable."""
        ...


# ---------------------------------------------------------------------------------------------------- REST


def _refused(reason: object) -> bool:
    return isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower()


class Rest:
    """The API server over HTTPS with a bearer token: a pod's ServiceAccount (`in_cluster`), or given ones."""

    def __init__(self, server: str, token: str, ca_file: str | None = None) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()

    @classmethod
    def in_cluster(cls, account: Path = SERVICE_ACCOUNT) -> Rest:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ApiError("KUBERNETES_SERVICE_HOST is not set: not in a pod (give --server and --token-file)")
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", (account / "token").read_text().strip(), str(account / "ca.crt"))

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "Content-Type": content_type}
        request = urllib.request.Request(self.server + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=REQUEST_TIMEOUT_SECONDS) as response:
                return Answer(response.status, response.read())
        except urllib.error.HTTPError as error:
            after = error.headers.get("Retry-After") if error.headers else None
            try:
                retry = float(after) if after is not None else None
            except ValueError:
                retry = None
            return Answer(error.code, error.read(), retry, str(error.reason or ""))
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            raise Unreachable(str(reason), sent=not _refused(reason)) from None


# ---------------------------------------------------------------------------------------------------- kubectl

# kubectl's `Error from server (<Reason>)` -> the HTTP status the API server sent with it (metav1.StatusReason).
_REASONS = {
    "NotFound": 404,
    "Conflict": 409,
    "AlreadyExists": 409,
    "TooManyRequests": 429,
    "Forbidden": 403,
    "Unauthorized": 401,
    "Invalid": 422,
    "BadRequest": 400,
    "MethodNotAllowed": 405,
    "InternalError": 500,
    "ServiceUnavailable": 503,
    "Timeout": 504,
}
_NO_SERVER = ("unable to connect", "connection refused", "no such host", "i/o timeout", "connection reset", "eof")


def kubectl_resource(path: str) -> tuple[str, str, str | None, str | None]:
    """(resource[.version.group], name, namespace, subresource) of an object's API path, for `kubectl patch`."""
    parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(path).path.strip("/").split("/")]
    if parts[0] == "api":
        qualifier, rest = "", parts[2:]
    else:
        qualifier, rest = f".{parts[2]}.{parts[1]}", parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) < 2:
        raise ValueError(f"{path} names no object")
    return rest[0] + qualifier, rest[1], namespace, rest[2] if len(rest) > 2 else None


class Kubectl:
    """The API server through kubectl (`argv`: kubectl with the stack's --kubeconfig and --context)."""

    def __init__(self, argv: list[str], timeout: int = 120) -> None:
        self.argv = argv
        self.timeout = timeout

    def _args(self, method: str, path: str, content_type: str, body: bytes | None) -> list[str]:
        if method == "GET":
            return ["get", "--raw", path]
        if method == "POST":
            return ["create", "--raw", path, "-f", "-"]
        if method == "PUT":
            return ["replace", "--raw", path, "-f", "-"]
        if method == "DELETE":
            return ["delete", "--raw", path]
        if method == "PATCH":
            resource, name, namespace, sub = kubectl_resource(path)
            kind = {MERGE: "merge", STRATEGIC: "strategic"}.get(content_type, "json")
            args = ["patch", resource, name, f"--type={kind}", "-p", (body or b"{}").decode(), "-o", "json"]
            return args + (["-n", namespace] if namespace else []) + ([f"--subresource={sub}"] if sub else [])
        raise ValueError(f"kubectl transport: no {method}")

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        args = self._args(method, path, content_type, body)
        stdin = body.decode() if body is not None and method in ("POST", "PUT") else None
        try:
            done = subprocess.run(
                [*self.argv, *args], input=stdin, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError:
            raise ApiError(f"{self.argv[0]} not found: install kubectl on the machine that runs pulumi") from None
        except subprocess.TimeoutExpired:
            raise Unreachable(f"kubectl {args[0]} {path} did not answer within {self.timeout} s", sent=True) from None
        if done.returncode == 0:
            return Answer(200, done.stdout.encode())
        text = (done.stderr or done.stdout).strip()
        line = text.splitlines()[-1] if text else f"kubectl exit {done.returncode}"
        for reason, status in _REASONS.items():
            if f"({reason})" in line:
                return Answer(status, json.dumps({"message": line}).encode(), None, reason)
        if "the object has been modified" in line:
            return Answer(409, json.dumps({"message": line}).encode(), None, "Conflict")
        lowered = line.lower()
        if any(sign in lowered for sign in _NO_SERVER):
            raise Unreachable(line, sent="refused" not in lowered)
        return Answer(500, json.dumps({"message": line}).encode(), None, "kubectl")


# ---------------------------------------------------------------------------------------------------- the client


def _message(answer: Answer) -> str:
    try:
        parsed = json.loads(answer.body or b"{}")
    except ValueError:
        return answer.body.decode(errors="replace")[:300]
    return str(parsed.get("message") or answer.reason) if isinstance(parsed, dict) else str(parsed)[:300]


@dataclass
class Kube:
    """The Kubernetes client (see the module's docstring for its interface and its retries)."""

    transport: Transport
    sleep: Callable[[float], None] = time.sleep
    max_retries: int = MAX_RETRIES
    # Who posts Events (their `source`): the component and the host.
    component: str = "gpu-pool"
    host: str = field(default_factory=socket.gethostname)

    def send(self, method: str, path: str, body: Any = None, content_type: str = JSON, retry: bool = True) -> Any:
        """The answer's JSON (None for a GET that found nothing); ApiError otherwise. `retry` False: a 429 is the
        caller's to handle (an eviction a PodDisruptionBudget refuses)."""
        data = json.dumps(body).encode() if body is not None else None
        answer = self._sent(method, path, data, content_type, retry)
        if answer.status < 300:
            return json.loads(answer.body) if answer.body.strip() else None
        if answer.status == 404 and method in ("GET", "DELETE"):
            return None
        error = f"{method} {path}: {answer.status} {answer.reason or ''}: {_message(answer)}"
        raise (Conflict if answer.status == 409 else ApiError)(error, answer.status)

    def _sent(self, method: str, path: str, data: bytes | None, content_type: str, retry: bool) -> Answer:
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self.transport.request(method, path, data, content_type)
            except Unreachable as error:
                # A request that never reached the server is safe to send again; any other only when it is a read.
                if attempt > self.max_retries or (error.sent and method != "GET"):
                    raise ApiError(f"{method} {path}: no answer from the API server: {error}") from None
                self.sleep(self._pause(attempt, None))
                continue
            again = answer.status == 429 or (answer.status >= 500 and answer.retry_after is not None)
            again = again or (method == "GET" and answer.status >= 500)
            if not again or not retry or attempt > self.max_retries:
                return answer
            self.sleep(self._pause(attempt, answer.retry_after))

    @staticmethod
    def _pause(attempt: int, retry_after: float | None) -> float:
        """The server's Retry-After (capped); for an error without one, a second, as client-go answers it with an
        artificial `Retry-After: 1` (rest/with_retry.go IsNextRetry)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_PAUSE_SECONDS)
        return ERROR_PAUSE_SECONDS

    # ------------------------------------------------------------------------------------------------ verbs

    def get(self, path: str) -> Any:
        return self.send("GET", path)

    def list(self, path: str, kind: str) -> list[dict[str, Any]]:
        found = self.send("GET", path) or {}
        return [{"kind": kind, **item} for item in found.get("items") or []]

    def text(self, path: str) -> str:
        answer = self._sent("GET", path, None, JSON, True)
        if answer.status >= 300:
            raise ApiError(f"GET {path}: {answer.status} {answer.reason}: {_message(answer)}", answer.status)
        return answer.body.decode(errors="replace")

    def create(self, path: str, body: Any, retry: bool = True) -> Any:
        return self.send("POST", path, body, retry=retry)

    def update(self, path: str, body: Any) -> Any:
        return self.send("PUT", path, body)

    def patch(self, path: str, patch: Any, content_type: str = MERGE) -> Any:
        return self.send("PATCH", path, patch, content_type)

    def delete(self, path: str) -> None:
        self.send("DELETE", path)

    # ------------------------------------------------------------------------------------------------ Nodes

    def node(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.get(node_path(name))
        return found

    def patch_node(
        self, name: str, change: Callable[[dict[str, Any]], Mapping[str, Any] | None]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A merge patch of the Node with what `change` makes of it as read now, carrying that resourceVersion: a
        concurrent writer (the kubelet's status, the operator's labels) makes it 409 and it is made again with the
        Node read again, so no write is lost. `change` returning None: nothing to write. (the Node before, after)."""
        for _attempt in range(CONFLICT_ATTEMPTS):
            node = self.node(name)
            if node is None:
                raise ApiError(f"node {name} is gone", 404)
            wanted = change(node)
            if wanted is None:
                return node, node
            patch = json.loads(json.dumps(dict(wanted)))
            patch.setdefault("metadata", {})["resourceVersion"] = resource_version(node)
            try:
                after = self.patch(node_path(name), patch)
            except Conflict:
                continue
            return node, after or node
        raise ApiError(f"node {name} kept changing under the patch ({CONFLICT_ATTEMPTS} conflicts)", 409)

    def event(self, node: Mapping[str, Any], kind: str, reason: str, message: str, namespace: str = "default") -> bool:
        """A core/v1 Event on the Node (what `kubectl describe node` lists), as the kubelet writes its own: the Node
        as its involved object. False when it could not be posted: the record on the Node is what counts, an
        Event is for people and expires within hours anyway."""
        try:
            self.create(f"/api/v1/namespaces/{namespace}/events", event_of(node, kind, reason, message, self))
        except ApiError:
            return False
        return True


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{urllib.parse.quote(name)}"


def event_of(
    node: Mapping[str, Any],
    kind: str,
    reason: str,
    message: str,
    kube: Kube,
    now: datetime.datetime | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    meta = node.get("metadata") or {}
    name = str(meta.get("name"))
    at = stamp(now or datetime.datetime.now(datetime.UTC))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.{kube.component}-", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta.get("uid", "")},
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": kube.component, "host": kube.host},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }
