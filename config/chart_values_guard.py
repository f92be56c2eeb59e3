"""Which chart values gpu-pool sets to prevent a trap, so `extraValues` cannot quietly undo them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple


class GuardedKey(NamedTuple):
    """A chart value the program sets to prevent a trap, and where the user controls it instead."""

    trap: str
    instead: str


# Chart values the program sets to prevent one of the article's traps. `extraValues` must not
# override them, or the escape hatch would quietly re-open the trap.
GUARDED_KEYS: Final[Mapping[str, GuardedKey]] = {
    "driver.version": GuardedKey(
        "a driver the chart does not support (the article's 570.133.20 and its NVML bug)",
        "gpuOperator.driverVersion, which is checked against the chart's supported drivers",
    ),
    "driver.kernelModuleType": GuardedKey(
        "the wrong kernel module flavour for the card", "gpuOperator.kernelModuleType"
    ),
    "driver.usePrecompiled": GuardedKey(
        "\"failed to install nvidia kernel module: distro 'ubuntu24.04' not supported\"",
        "gpuOperator.usePrecompiled",
    ),
    "driver.resources": GuardedKey(
        "the driver OOM-killed (exit 137) while compiling the kernel module", "gpuOperator.driverResources"
    ),
    "driver.upgradePolicy.autoUpgrade": GuardedKey(
        "driver pods never upgraded, or upgraded on every node at once (the wave's gate waits for the operator's "
        "upgrade on the node it drained)",
        "nothing: the operator upgrades the node each wave turn cordons",
    ),
    "driver.upgradePolicy.maxUnavailable": GuardedKey(
        "a driver bump on a node of the operator's choosing while the wave drains another: two failure domains out",
        "gpu-pool:rollout.maxUnavailable, which sets how many domains a wave (and so the operator) takes out",
    ),
    "driver.upgradePolicy.gpuPodDeletion.deleteEmptyDir": GuardedKey(
        "a notebook's GPU pod with an emptyDir (/dev/shm) refused by the operator's pod deletion: upgrade-failed",
        "nothing: the operator deletes what the wave's drain deletes",
    ),
    "driver.upgradePolicy.gpuPodDeletion.timeoutSeconds": GuardedKey(
        "the operator gives up on a PodDisruptionBudget the wave's drain still waits out: upgrade-failed",
        "nothing: it waits as long as the wave's drain",
    ),
    "cdi.enabled": GuardedKey(
        "'Failed to initialize NVML: Driver/library version mismatch' after RKE2 regenerates config.toml",
        "nothing: CDI stays on",
    ),
    "cdi.nriPluginEnabled": GuardedKey(
        "the experimental NRI plugin, which needs containerd 2.1", "nothing: the NRI plugin stays off"
    ),
    "toolkit.env": GuardedKey(
        "'no runtime for \"nvidia\" is configured' (the toolkit must reach RKE2's containerd socket)",
        "gpuOperator.toolkit.containerdSocket",
    ),
    "operator.upgradeCRD": GuardedKey(
        "a stale CRD that silently prunes the fields a new operator reads (Helm never upgrades crds/): "
        "the chart's hook and gpu-pool's CRD resources would both own the CRDs",
        "gpuOperator.chart: with a chart on disk gpu-pool registers the CRDs itself, otherwise the hook runs",
    ),
    "operator.runtimeClass": GuardedKey(
        "a RuntimeClass whose handler RKE2 does not register ('no runtime for \"nvidia\" is configured')",
        "nothing: RKE2 registers the nvidia handler itself",
    ),
    "daemonsets.tolerations": GuardedKey(
        "the device plugin Pending on tainted GPU nodes ('Insufficient nvidia.com/gpu'): Helm replaces the whole list",
        "nothing: the list already tolerates the nvidia.com/gpu taint",
    ),
    "node-feature-discovery.master.tolerations": GuardedKey(
        "NFD's master without its control-plane toleration, which never labels a node",
        "nothing: the list already tolerates the control-plane taint",
    ),
    "devicePlugin.config": GuardedKey(
        "the device plugin pointed at a ConfigMap that does not exist yet (a card drops from 1 to 0 GPUs)",
        "gpu-pool's sharing profiles, whose ConfigMap is created before the release",
    ),
    "dcgmExporter.resources": GuardedKey(
        "the DCGM exporter OOM-killed right after 'DCGM successfully initialized!'",
        "gpuOperator.dcgmExporterResources",
    ),
    "dcgmExporter.annotations.gpu-pool/dcgm-metrics-sha256": GuardedKey(
        "exporters that never see a changed metric list (the CSV is mounted with subPath)",
        "nothing: the digest follows the CSV",
    ),
    "dcgmExporter.config": GuardedKey(
        "dashboards and alerts querying metrics the exporter no longer emits",
        "gpu-pool's DCGM metrics settings",
    ),
}


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every dotted leaf path of a Helm values tree with its value.

    Non-empty mappings are descended into; anything else (scalars, None, lists, empty mappings) is a
    leaf: Helm replaces a list as a whole, so a list item counts as the list's path.
    """
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path)
        else:
            yield path, value


def overlaps(path: str, value: Any, guarded: str) -> bool:
    if path == guarded or path.startswith(guarded + "."):
        return True
    # A non-mapping value above a guarded key replaces (or, as null, deletes) the whole section.
    # An empty mapping merges to nothing in Helm, so it touches nothing.
    return guarded.startswith(path + ".") and not (isinstance(value, Mapping) and not value)
