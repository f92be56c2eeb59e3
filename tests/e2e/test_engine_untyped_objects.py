"""A stack whose Kubernetes objects were created by the SDK's typed classes (every gpu-pool stack `up` before the
program registered them untyped, components/shared/kubernetes_objects.py) previews with no change under the real
engine and provider once the program registers the same objects untyped: nothing is updated, replaced or deleted.
The objects are one of each kind the program writes that need no workload to run (a Job would wait for its pod to
complete, the release for a chart's workloads; their requests are compared with the typed classes' in
tests/shared/test_kubernetes_objects.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline.runner import PROJECT
from tests.e2e.control_plane import ControlPlane
from tests.e2e.engine import Engine, PulumiStack
from tests.e2e.engine_stacks import new_stack

PROGRAM = '''"""Typed or untyped, as gpu-pool:typed says: the same objects either way."""
import importlib

import pulumi
import pulumi_kubernetes as kubernetes

from components.shared.kubernetes_objects import register_object

config = pulumi.Config()
provider = kubernetes.Provider("k8s", kubeconfig=config.require("kubeconfig"))
opts = pulumi.ResourceOptions(provider=provider)
meta = {"labels": {"app.kubernetes.io/part-of": "gpu-pool"}}
ns = "e2e-untyped"
rule = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
ref = {"apiGroup": "rbac.authorization.k8s.io", "name": "e2e-untyped"}
subjects = [{"kind": "ServiceAccount", "name": "e2e-untyped", "namespace": ns}]
crd_spec = {
    "group": "e2e.gpu-pool.dev",
    "names": {"kind": "Sample", "plural": "samples", "singular": "sample", "listKind": "SampleList"},
    "scope": "Namespaced",
    "versions": [{"name": "v1", "served": True, "storage": True,
                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
}
objects = [
    ("namespace", "v1", "Namespace", {"name": ns}, {}),
    ("configmap", "v1", "ConfigMap", {"name": "e2e-untyped", "namespace": ns}, {"data": {"a": "b"}}),
    ("serviceaccount", "v1", "ServiceAccount", {"name": "e2e-untyped", "namespace": ns}, {}),
    ("quota", "v1", "ResourceQuota", {"name": "e2e-untyped", "namespace": ns},
     {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}),
    ("clusterrole", "rbac.authorization.k8s.io/v1", "ClusterRole", {"name": "e2e-untyped"}, {"rules": rule}),
    ("role", "rbac.authorization.k8s.io/v1", "Role", {"name": "e2e-untyped", "namespace": ns}, {"rules": rule}),
    ("clusterrolebinding", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", {"name": "e2e-untyped"},
     {"roleRef": {**ref, "kind": "ClusterRole"}, "subjects": subjects}),
    ("rolebinding", "rbac.authorization.k8s.io/v1", "RoleBinding", {"name": "e2e-untyped", "namespace": ns},
     {"roleRef": {**ref, "kind": "Role"}, "subjects": subjects}),
    ("cronjob", "batch/v1", "CronJob", {"name": "e2e-untyped", "namespace": ns},
     {"spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {"template": {"spec": {
         "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
    ("crd", "apiextensions.k8s.io/v1", "CustomResourceDefinition", {"name": "samples.e2e.gpu-pool.dev"},
     {"spec": crd_spec}),
]
MODULES = {"v1": "core.v1", "rbac.authorization.k8s.io/v1": "rbac.v1", "batch/v1": "batch.v1",
           "apiextensions.k8s.io/v1": "apiextensions.v1"}
created = {}
for name, api_version, kind, metadata, body in objects:
    depends = pulumi.ResourceOptions(depends_on=[created["namespace"]] if "namespace" in metadata else [])
    options = pulumi.ResourceOptions.merge(opts, depends)
    metadata = {**meta, **metadata}
    if config.require_bool("typed"):
        cls = getattr(importlib.import_module(f"pulumi_kubernetes.{MODULES[api_version]}"), kind)
        fields = {"role_ref" if k == "roleRef" else k: v for k, v in body.items()}
        created[name] = cls(name, metadata=metadata, opts=options, **fields)
    else:
        obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}
        created[name] = register_object(name, obj, options)
'''


@pytest.fixture
def objects_stack(engine: Engine, engine_path: list[Path], control_plane: ControlPlane, tmp_path: Path) -> PulumiStack:
    # The control plane: its controller manager fills the quota's status, which the provider waits for.
    config = {f"{PROJECT}:typed": "true", f"{PROJECT}:kubeconfig": str(control_plane.kubeconfig)}
    stack = new_stack(engine, tmp_path, "untyped", config, engine_path, {})
    main = stack.project_dir / "__main__.py"
    main.unlink()  # the program's own entry point, linked by init: this test's program replaces it
    main.write_text(PROGRAM)
    return stack


def test_objects_the_typed_classes_created_preview_unchanged_when_registered_untyped(
    objects_stack: PulumiStack,
) -> None:
    objects_stack.up()
    try:
        objects_stack.run("config", "set", f"{PROJECT}:typed", "false")
        preview = objects_stack.preview_json()
        # The stack, the provider and the ten objects, each the same; a step is listed only when it changes.
        changes = {step["urn"].rsplit("::", 1)[-1]: step["op"] for step in preview["steps"] if step["op"] != "same"}
        assert preview["changeSummary"] == {"same": 12}, (preview["changeSummary"], changes)
    finally:
        objects_stack.run("destroy", "--yes", check=False)
