"""A running Kyverno (v1.19.1) given the quota policy with namespaces already labelled: `generateExisting`, and a
switch of `kyverno.policyApi`.

On a control plane of this module's own with Kyverno's controllers (tests/e2e/cluster_programs.py). Each policy is
applied as `pulumi up` applies it (server-side apply, the provider's field manager, conflicts forced) from the
offline preview of prod (the CEL GeneratingPolicy) or of its ClusterPolicy twin; each test removes its policies and
namespaces again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from components.gpu_platform.quota_policy import GENERATED_BY_LABEL, QUOTA_POLICY_NAME
from tests.e2e.cluster_programs import running_kyverno
from tests.e2e.conftest import reported_control_plane
from tests.e2e.control_plane import ControlPlane, eventually
from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed

QUOTA = "gpu-quota-kubeflow-profiles"
RULE = "kubeflow-profiles"
LABEL = "app.kubernetes.io/part-of=kubeflow-profile"
# What each policy API's policy is called on what it generates.
GENERATED_BY = {"cel": f"{QUOTA_POLICY_NAME}-{RULE}", "clusterpolicy": QUOTA_POLICY_NAME}


@pytest.fixture(scope="module")
def kyverno_cluster(e2e_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("kyverno-existing")
    with reported_control_plane(e2e_tools, work) as plane, running_kyverno(e2e_tools, plane):
        yield plane


def quota_manifests(stack: Previewed) -> list[Path]:
    """The quota policy of the stack and the ClusterRole that lets Kyverno manage ResourceQuotas."""
    found = []
    for path in stack.manifests():
        kinds = {(d["kind"], d["metadata"]["name"]) for d in load_documents(path.read_text())}
        if any(kind in ("ClusterPolicy", "GeneratingPolicy") and QUOTA_POLICY_NAME in name for kind, name in kinds):
            found.append(path)
        if ("ClusterRole", "gpu-pool:kyverno-manage-resourcequotas") in kinds:
            found.append(path)
    assert len(found) == 2, found
    return found


def install(kubectl: Kubectl, stack: Previewed) -> None:
    for path in quota_manifests(stack):
        done = kubectl.server_side_apply(path, dry_run=False)
        assert done.returncode == 0, done.stderr


def remove(kubectl: Kubectl, stack: Previewed) -> None:
    """The policy first, then the ClusterRole Kyverno needs to clean up after it."""
    for path in sorted(quota_manifests(stack), key=lambda p: p.name.startswith("clusterrole-")):
        kubectl("delete", "--ignore-not-found", "--wait=true", "-f", str(path))


def generated_by(kubectl: Kubectl, namespace: str) -> str | None:
    """Which policy generated the namespace's GPU quota, None if it has none."""
    quota = kubectl.api.call("GET", f"/api/v1/namespaces/{namespace}/resourcequotas/{QUOTA}")
    if quota is None:
        return None
    return str(quota["metadata"]["labels"].get(GENERATED_BY_LABEL))


@pytest.fixture
def labelled(kyverno_cluster: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace with the selector's labels, made before any quota policy exists (a Kubeflow profile)."""
    kubectl = kyverno_cluster.kubectl
    name = f"profile-{request.node.name.split('[')[0][-20:].strip('_').replace('_', '-')}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, LABEL)
    try:
        yield name
    finally:
        kubectl("delete", "namespace", name, "--wait=true", "--timeout=120s")


@pytest.mark.parametrize("policy_api", ["cel", "clusterpolicy"])
def test_a_namespace_labelled_before_the_policy_gets_its_quota_when_the_policy_is_installed(
    policy_api: str, kyverno_cluster: ControlPlane, labelled: str, request: pytest.FixtureRequest
) -> None:
    stack: Previewed = request.getfixturevalue(f"{'prod' if policy_api == 'cel' else 'clusterpolicy'}_stack")
    kubectl = kyverno_cluster.kubectl
    assert generated_by(kubectl, labelled) is None
    install(kubectl, stack)
    try:
        assert eventually("the quota generated", lambda: generated_by(kubectl, labelled)) == GENERATED_BY[policy_api]
    finally:
        remove(kubectl, stack)


class QuotaLost(AssertionError):
    """The labelled namespace has no GPU quota after the switch."""


@pytest.mark.xfail(
    raises=QuotaLost,
    strict=True,
    reason=(
        "switching kyverno.policyApi in one `up`: pulumi creates the new policy, whose generateExisting adopts the "
        "quota of the same name (or, racing the old policy's watcher, leaves it to the old policy), then deletes the "
        "old one, whose clean-up deletes that quota; nothing puts it back (Kyverno ignores deletions by its own "
        "background controller). Reported to the lead (issue 28)"
    ),
)
def test_switching_the_policy_api_in_one_up_keeps_the_quota_of_a_labelled_namespace(
    kyverno_cluster: ControlPlane, labelled: str, prod_stack: Previewed, clusterpolicy_stack: Previewed
) -> None:
    """CEL to ClusterPolicy in pulumi's order: the new policy created, then the one no longer in the program
    deleted."""
    kubectl = kyverno_cluster.kubectl
    install(kubectl, prod_stack)
    try:
        eventually("the CEL policy's quota", lambda: generated_by(kubectl, labelled) == GENERATED_BY["cel"])
        install(kubectl, clusterpolicy_stack)
        # In the `up` that found this, the new policy's generateExisting had adopted the quota before the old policy
        # went. It does not always: its background run can race the old policy's watcher updating the same quota
        # (seen 2026-12-04: the new policy's UpdateRequest processed, nothing generated or adopted). Either way
        # pulumi deletes the old policy next; what the test asks is whether the namespace still has a quota then.
        try:
            eventually("adopted", lambda: generated_by(kubectl, labelled) == GENERATED_BY["clusterpolicy"], 30)
            adopted = "adopted by the new policy"
        except AssertionError:
            adopted = "never adopted by the new policy"
        for path in quota_manifests(prod_stack):
            if "generatingpolicy-" in path.name:
                kubectl("delete", "--wait=true", "-f", str(path))
        try:
            eventually("a quota after the switch", lambda: generated_by(kubectl, labelled), 60)
        except AssertionError as lost:
            raise QuotaLost(f"{lost} (the quota was {adopted} before the old policy went)") from None
    finally:
        remove(kubectl, prod_stack)
        remove(kubectl, clusterpolicy_stack)
