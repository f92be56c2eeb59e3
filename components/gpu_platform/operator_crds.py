"""The CRDs of the GPU Operator chart, registered by the program instead of left to Helm.

Helm installs a chart's `crds/` on first install and never again (helm.sh/docs chart_best_practices/
custom_resource_definitions): a chart bump would leave the old CRDs, and the API server prunes every field the
old schema lacks, so the new operator reads nothing of what it was told (one public report: "the operator deployed
no device plugin and still reported itself ready"). The chart's own answer is a pre-upgrade hook Job
(templates/upgrade_crd.yaml) that is invisible in a preview, and at v26.7.0 it applies only clusterpolicies,
nvidiadrivers, gpuclusters and NFD's file, not the two resource.nvidia.com CRDs in the same `crds/`. As
resources, every CRD of the pinned chart is created before the release and updated in the same plan as a bump,
where `make diff` shows it.
"""

from __future__ import annotations

from typing import Any

from config.chart_source import LocalChart

# Adopting CRDs that Helm installed (and the chart's hook upgraded): the program's server-side apply of the same
# version shares ownership, but the next chart's CRDs conflict with the fields Helm's create owns, and the API server
# refuses them without forcing (proven on the real kube-apiserver, tests/e2e/test_gpu_operator_upgrade.py). With the
# hook off, nothing else writes these CRDs, so the program forces: pulumi-kubernetes reads this annotation.
PATCH_FORCE = {"pulumi.com/patchForce": "true"}

# A CRD served from `charts/node-feature-discovery/crds/` belongs to the NFD subchart, which the chart installs
# only with nfd.enabled (its condition in Chart.yaml).
NFD_SUBCHART_PREFIX = "charts/node-feature-discovery/"


def build_operator_crds(chart: LocalChart, *, nfd_enabled: bool) -> list[dict[str, Any]]:
    """Every CRD the chart would install, as plain objects, in a stable order (by name). Pure."""
    crds = [
        # A new top level and metadata, for the annotation below; the rest stays the parsed chart's, read-only as
        # every document of that cache (config/chart_source.py): deep copies of megabytes of schema cost each
        # real-engine preview about 40 ms of its program's time (docs/engine.md).
        {**doc, "metadata": dict(doc["metadata"])}
        for crd_file in chart.crd_files
        if nfd_enabled or not crd_file.path.startswith(NFD_SUBCHART_PREFIX)
        for doc in crd_file.documents
        if doc.get("kind") == "CustomResourceDefinition"
    ]
    names = [crd["metadata"]["name"] for crd in crds]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"the chart defines these CRDs twice: {', '.join(duplicates)}")
    for crd in crds:
        crd["metadata"]["annotations"] = {**crd["metadata"].get("annotations", {}), **PATCH_FORCE}
    return sorted(crds, key=lambda crd: str(crd["metadata"]["name"]))


def crd_resource_suffix(crd: dict[str, Any]) -> str:
    """`crd-<plural>.<group>`: the CRD's own name, which never changes across chart versions (an update, never a
    replacement of a CRD, which would delete every custom resource of its kind)."""
    return f"crd-{crd['metadata']['name']}"
