"""The built kubectl, pointed at the e2e API server: a thin wrapper that keeps the server's words verbatim."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# What pulumi-kubernetes (v4, server-side apply) sends its objects with.
PULUMI_FIELD_MANAGER = "pulumi-kubernetes"


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
