"""The untyped registrations (components/shared/kubernetes_objects.py) are the typed classes' resources: for every
kind, the registration request the engine receives is the one the SDK's typed class sends, field for field (type
token, inputs, SDK version, aliases, provider, dependencies, timeouts...). A stack created with the typed classes
therefore previews with no change; and the program's preview never imports the typed modules it avoids."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import pytest
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from pulumi.runtime import mocks

from components.shared.kubernetes_objects import (
    NODE_PATCH_TYPE,
    TYPED_KINDS,
    register_helm_release,
    register_node_patch,
    register_object,
)
from offline.recording import PlanMocks
from offline.runner import ROOT_DIR, execute

# The SDK module of each API group (pulumi_kubernetes.<module>.<version>.<Kind>).
SDK_MODULE = {
    "": "core",
    "rbac.authorization.k8s.io": "rbac",
    "batch": "batch",
    "apiextensions.k8s.io": "apiextensions",
    "coordination.k8s.io": "coordination",
}
# Where a request names the code that registered it: differs by construction, means nothing to the engine.
SOURCE_ONLY = ("sourcePosition", "stackTrace")
METADATA = {"name": "gpu-pool-sample", "labels": {"app.kubernetes.io/part-of": "gpu-pool"}}
# One object of each kind, with the fields the program's builders give it.
BODIES: dict[str, dict[str, Any]] = {
    "Namespace": {},
    "Lease": {"spec": {"leaseDurationSeconds": 3600}},
    "ConfigMap": {"data": {"any.yaml": "version: v1\n"}, "binaryData": {"blob": "AAEC"}},
    "ServiceAccount": {},
    "ResourceQuota": {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    "ClusterRole": {"rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "create"]}]},
    "Role": {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
    "ClusterRoleBinding": {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "s", "namespace": "n"}],
    },
    "RoleBinding": {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "s", "namespace": "n"}],
    },
    "CronJob": {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}},
    "Job": {"spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": []}}}},
    "CustomResourceDefinition": {
        "spec": {
            "group": "nvidia.com",
            "names": {"kind": "ClusterPolicy", "plural": "clusterpolicies"},
            "scope": "Cluster",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {}}}],
        }
    },
}


class Capturing(mocks.MockMonitor):
    def __init__(self) -> None:
        super().__init__(PlanMocks(preview=True))
        self.requests: list[dict[str, Any]] = []

    def RegisterResource(self, request: Any) -> Any:
        if request.type not in ("pulumi:pulumi:Stack", "pulumi:providers:kubernetes"):
            sent = MessageToDict(request)
            self.requests.append({k: v for k, v in sent.items() if k not in SOURCE_ONLY})
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]


def requests_of(register: Callable[[pulumi.ResourceOptions], object]) -> list[dict[str, Any]]:
    """What the engine receives when `register` runs with a provider, a dependency and options, as the program's
    resources are registered."""
    monitor = Capturing()
    pulumi.runtime.set_mocks(monitor.mocks, project="gpu-pool", stack="objects", preview=True, monitor=monitor)

    def program() -> None:
        provider = kubernetes.Provider("k8s", kubeconfig="{}")
        before = pulumi.CustomResource("test:index:Before", "before", {})
        register(
            pulumi.ResourceOptions(
                provider=provider,
                depends_on=[before],
                custom_timeouts=pulumi.CustomTimeouts(create="900s"),
                retain_on_delete=True,
            )
        )

    execute(program)
    return [r for r in monitor.requests if r["type"] != "test:index:Before"]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def typed_class(api_version: str, kind: str) -> Any:
    group, _, version = api_version.rpartition("/")
    return getattr(importlib.import_module(f"pulumi_kubernetes.{SDK_MODULE[group]}.{version}"), kind)


@pytest.mark.parametrize("api_version,kind", sorted(TYPED_KINDS), ids=lambda v: str(v))
def test_each_kind_is_registered_exactly_as_the_sdk_typed_class_registers_it(api_version: str, kind: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": METADATA, **BODIES[kind]}
    fields = {snake(key): value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    typed = requests_of(lambda opts: typed_class(api_version, kind)("sample", opts=opts, **fields))
    untyped = requests_of(lambda opts: register_object("sample", obj, opts))
    assert untyped == typed
    assert typed[0]["object"]["kind"] == kind, "the comparison saw the object itself"


def test_every_kind_the_program_writes_with_a_typed_class_is_compared() -> None:
    # A kind added to TYPED_KINDS without a sample here would go unproven.
    assert {kind for _, kind in TYPED_KINDS} == set(BODIES)


def test_the_node_patch_is_registered_exactly_as_the_sdk_node_patch() -> None:
    # Any: a plain dict where pulumi-kubernetes 4.32's stubs want their TypedDict.
    metadata: Any = {"name": "rke2-worker-dc1-gpu-a", "labels": {"nvidia.com/gpu.workload.config": "container"}}
    typed = requests_of(lambda opts: kubernetes.core.v1.NodePatch("dc1-node-labels", metadata=metadata, opts=opts))
    untyped = requests_of(lambda opts: register_node_patch("dc1-node-labels", metadata, opts))
    assert untyped == typed and typed[0]["type"] == NODE_PATCH_TYPE


@pytest.mark.parametrize("repository", [None, "https://helm.ngc.nvidia.com/nvidia"], ids=["chart on disk", "repo"])
def test_the_helm_release_is_registered_exactly_as_the_sdk_release(repository: str | None) -> None:
    values = {"driver": {"version": "595.91.07", "upgradePolicy": {"maxUnavailable": "0"}}}
    typed_args: dict[str, Any] = {
        "name": "gpu-operator",
        "chart": "charts/gpu-operator-v26.7.0.tgz" if repository is None else "gpu-operator",
        "version": "v26.7.0",
        "repository_opts": None if repository is None else {"repo": repository},
        "skip_crds": repository is None,
        "namespace": "gpu-operator",
        "create_namespace": False,
        "values": values,
        "skip_await": True,
        "timeout": 900,
    }
    release = {
        "".join(w.title() if i else w for i, w in enumerate(k.split("_"))): v
        for k, v in typed_args.items()
        if v is not None
    }
    typed = requests_of(lambda opts: kubernetes.helm.v3.Release("gpu-platform-gpu-operator", opts=opts, **typed_args))
    untyped = requests_of(lambda opts: register_helm_release("gpu-platform-gpu-operator", release, opts))
    assert untyped == typed and typed[0]["type"] == "kubernetes:helm.sh/v3:Release"


def test_a_preview_of_prod_never_imports_the_typed_kubernetes_modules() -> None:
    # Importing pulumi_kubernetes.core.v1 alone was about 0.5 s of each real-engine preview (docs/engine.md).
    avoided = ("pulumi_kubernetes.core.v1", "pulumi_kubernetes.helm.v3", "pulumi_kubernetes.rbac.v1",
               "pulumi_kubernetes.batch.v1")  # fmt: skip
    probe = (
        "import sys\n"
        "from offline.runner import run_stack\n"
        "run_stack('prod')\n"
        f"print([m for m in {avoided!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT_DIR, capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
