"""pulumi-kubernetes 4.32 under the real engine meets objects the cluster already has: the control plane the stack
is deployed to holds the GPU Operator chart's CRDs (applied by the `deployed_plane` fixture, field manager
`e2e-setup`, as an earlier Helm install leaves them in a lab). Without gpu-pool:kubernetes.adoptExisting the
preview refuses, naming each; with it, the `up` says what it adopts and the provider takes each CRD over (its field
manager joins), and nothing else existing is touched."""

from __future__ import annotations

import json

from tests.e2e.engine_deployed import Deployed

CHART_CRDS = (
    "clusterpolicies.nvidia.com",
    "nvidiadrivers.nvidia.com",
    "gpuclusters.nvidia.com",
    "computedomains.resource.nvidia.com",
    "computedomaincliques.resource.nvidia.com",
)


def test_without_adopt_existing_the_preview_refuses_each_crd_the_cluster_already_has_naming_who_wrote_it(
    deployed: Deployed,
) -> None:
    for name in CHART_CRDS:
        assert f"the cluster already has CustomResourceDefinition {name} (written by e2e-setup" in deployed.refused
    assert "set gpu-pool:kubernetes.adoptExisting to true" in deployed.refused


def test_with_adopt_existing_the_up_says_what_it_adopts_and_the_provider_takes_each_crd_over(
    deployed: Deployed,
) -> None:
    # The control plane's API server, where `deployed` runs (the session's bare one holds its own copy of the CRDs).
    kubectl = deployed.plane.kubectl
    assert "adopting" in deployed.first_up and "(gpu-pool:kubernetes.adoptExisting)" in deployed.first_up
    for name in CHART_CRDS:
        assert f"CustomResourceDefinition {name} (written by e2e-setup" in deployed.first_up
        crd = json.loads(kubectl("get", "crd", name, "--show-managed-fields", "-o", "json"))
        managers = {entry["manager"] for entry in crd["metadata"]["managedFields"]}
        assert "e2e-setup" in managers
        assert any(m.startswith("pulumi-kubernetes") for m in managers), managers
