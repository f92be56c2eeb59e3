"""The real API server accepts every object the stack creates or patches, exactly as the preview wrote it."""

from __future__ import annotations

import pytest

from tests.e2e.kube import Kubectl, load_documents, rejections
from tests.e2e.nodes import registered_nodes
from tests.e2e.stacks import Previewed


def kinds(stack: Previewed) -> set[str]:
    return {doc["kind"] for path in stack.manifests() for doc in load_documents(path.read_text())}


@pytest.mark.usefixtures("crds")
def test_the_api_server_accepts_every_object_the_stack_applies(stack: Previewed, kubectl: Kubectl) -> None:
    manifests = stack.manifests()
    namespaces = [path for path in manifests if path.name.startswith("namespace-")]
    # Nodes are patched, never created: they must be there, registered as RKE2 registers them.
    with registered_nodes(kubectl, stack):
        # The stack's Namespaces as creates (unless an earlier test made them), then for real: what lives in them
        # cannot be dry-run without them.
        results = [(path.name, kubectl.server_side_apply(path, dry_run=True)) for path in namespaces]
        kubectl.create_namespaces(manifests)
        others = [path for path in manifests if path not in namespaces]
        results += [(path.name, kubectl.server_side_apply(path, dry_run=True)) for path in others]
    problems = rejections(results)
    assert not problems, "the API server rejected:\n" + "\n".join(problems)


def test_both_stacks_cover_every_kind_of_object_the_program_writes(
    prod_stack: Previewed, options_stack: Previewed
) -> None:
    # The dry-run above is only as good as what it sends: each kind the program writes must be in it.
    common = {"ClusterRole", "ConfigMap", "Job", "Namespace", "Node", "PrometheusRule", "ResourceQuota"}
    # prod writes Kyverno's CEL policy types (the multi-GPU refusal a ValidatingPolicy); the options stack keeps
    # the ClusterPolicies (policyApi clusterpolicy).
    assert kinds(prod_stack) == common | {"MutatingPolicy", "GeneratingPolicy", "ValidatingPolicy"}
    # The options stack deploys the health check too: its account, RBAC and CronJob.
    health = {"ServiceAccount", "ClusterRoleBinding", "Role", "RoleBinding", "CronJob"}
    assert kinds(options_stack) == common | {"ClusterPolicy"} | health
