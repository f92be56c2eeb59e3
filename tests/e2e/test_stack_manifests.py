"""The real API server accepts every object the stack creates or patches, exactly as the preview wrote it."""

from __future__ import annotations

import pytest

from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.nodes import rejected_manifests
from tests.e2e.stacks import Previewed


def kinds(stack: Previewed) -> set[str]:
    return {doc["kind"] for path in stack.manifests() for doc in load_documents(path.read_text())}


@pytest.mark.usefixtures("crds")
def test_the_api_server_accepts_every_object_the_stack_applies(stack: Previewed, kubectl: Kubectl) -> None:
    problems = rejected_manifests(kubectl, stack)
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
