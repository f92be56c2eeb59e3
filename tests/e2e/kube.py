"""The built kubectl, pointed at the e2e API server: a thin wrapper that keeps the server's words verbatim."""

from __future__ import annotations

import functools
import http.client
import json
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# What pulumi-kubernetes (v4, server-side apply) sends its objects with.
PULUMI_FIELD_MANAGER = "pulumi-kubernetes"
# How many times a call the server answers 429 ("storage is (re)initializing") is tried.
RETRIES_429 = 10


class Api:
    """The API server over HTTPS with the kubeconfig's token, for what polls: a kubectl costs about 70 ms of CPU to
    start (a Go binary loading its discovery cache): in a full `make e2e` on 2 cores, kubectl processes took 923 of
    the run's 3751 CPU seconds, most of them started by the tests' own pollers (a watch sampling every node twice a
    second, the operator launcher, the upgrade nudge, waits), by process accounting (docs/engine.md). Each thread
    keeps one connection open: a TLS handshake per request (urllib's way) is work for the API server too."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = cluster["server"]
        self.token = config["users"][0]["user"]["token"]
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        # http.client, not urllib: a loopback server is never reached through a proxy the environment names, and
        # urllib copies the environment at every request to look for one (tests/e2e/conftest.py says why a
        # thread's copy of the environment is a hazard here).
        connection: http.client.HTTPSConnection | None = getattr(self.local, "connection", None)
        if connection is None:
            url = urllib.parse.urlsplit(self.url)
            connection = http.client.HTTPSConnection(url.hostname or "", url.port, context=self.context, timeout=30)
            self.local.connection = connection
        return connection

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes, str]:
        """One request on this thread's connection; a connection the server closed (idle, or restarted by a test)
        is opened again once."""
        for fresh in (False, True):
            connection = self._connection()
            try:
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                return response.status, response.read(), response.getheader("Retry-After") or ""
            except (http.client.HTTPException, OSError):
                connection.close()
                self.local.connection = None
                if fresh:
                    raise
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content_type}
        for _attempt in range(RETRIES_429):
            status, payload, retry_after = self._send(method, path, data, headers)
            if status < 300:
                return json.loads(payload) if payload else None
            if status in (404, 409):
                return None
            if status == 429:
                # The server asks for a retry ("storage is (re)initializing" while a CRD is being set up),
                # after the seconds it names: a controller waits as told, a bounded number of times.
                time.sleep(float(retry_after or 1))
                continue
            raise AssertionError(f"{method} {path}: {status} {payload.decode()[:500]}")
        raise AssertionError(f"{method} {path}: still 429 after {RETRIES_429} tries")

    def items(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        """A list's items; `selector` is a label selector, as kubectl's `-l`."""
        query = f"?{urllib.parse.urlencode({'labelSelector': selector})}" if selector else ""
        found = self.call("GET", path + query)
        return list((found or {}).get("items") or [])

    def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self.call("PATCH", path, patch, "application/merge-patch+json")

    def merge_status(self, path: str, status: dict[str, Any]) -> None:
        self.call("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")


class KubectlError(AssertionError):
    """A kubectl call failed; the message is what the server (or kubectl) said, verbatim."""


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path
    # kubectl caches discovery per server address; each run's server has a new port, so not in ~/.kube.
    cache_dir: Path

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        if done.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)} failed:\n{done.stderr.strip()}")
        return done.stdout

    @functools.cached_property
    def api(self) -> Api:
        """The same server and credentials over HTTPS, for reads and patches made in a loop."""
        return Api(self.kubeconfig)

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))

    def create(self, obj: Mapping[str, Any], *, field_manager: str) -> None:
        self("create", "--field-manager", field_manager, "-f", "-", stdin=json.dumps(obj))

    def ensure_namespace(self, name: str) -> None:
        """A namespace that exists in the real cluster before the stack runs (idempotent)."""
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(manifest))

    def server_side_apply(self, path: Path, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
        """What pulumi-kubernetes does with an object: server-side apply, conflicts forced (`patchForce`)."""
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager", PULUMI_FIELD_MANAGER, "-f", str(path)]
        return self.run(*args, *(["--dry-run=server"] if dry_run else []))

    def create_namespaces(self, manifests: Sequence[Path]) -> None:
        """The stack's own Namespaces for real (applied as the stack applies them), and any other namespace its
        objects live in as an existing one: a namespaced object cannot even be dry-run without its namespace."""
        documents = [load_documents(path.read_text()) for path in manifests]
        objects = [obj for docs in documents for obj in docs]
        own = {obj["metadata"]["name"] for obj in objects if obj["kind"] == "Namespace"}
        for path, docs in zip(manifests, documents, strict=True):
            if any(obj["kind"] == "Namespace" for obj in docs):
                done = self.server_side_apply(path, dry_run=False)
                if done.returncode != 0:
                    raise KubectlError(f"{path.name}: {done.stderr.strip()}")
        for name in sorted({obj["metadata"].get("namespace") for obj in objects} - own - {None}):
            self.ensure_namespace(name)


def load_documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def rejections(results: Iterable[tuple[str, subprocess.CompletedProcess[str]]]) -> list[str]:
    """`<what>: <server's message>` for every failed call, and for every warning the server returned."""
    found = []
    for what, done in results:
        if done.returncode != 0:
            found.append(f"{what}: {done.stderr.strip()}")
        elif "Warning:" in done.stderr:
            found.append(f"{what} (accepted with warnings): {done.stderr.strip()}")
    return found
