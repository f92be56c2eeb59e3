"""Helm values of the NVIDIA GPU Operator release, built from `GpuOperatorConfig`.

Every value set here fixes one of the article's traps ("The traps, from the driver up") or a fact
in DESIGN.md section 3; the comment next to it names which. `extraValues` is merged last, and the
config model already refused any extra value that would undo one of these fixes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from config.chart_values_guard import leaf_paths
from config.gpu_operator import GpuOperatorConfig, ToolkitConfig
from config.rollout import DRAIN_TIMEOUT_SECONDS
from knowledge.driver_template import DRIVER_MOUNTS_ENV
from knowledge.gpu_operator_chart import (
    CONTROL_PLANE_TOLERATION,
    DAEMONSETS_DEFAULT_TOLERATIONS,
    NFD_MASTER_DEFAULT_TOLERATIONS,
    NFD_WORKER_DEFAULT_TOLERATIONS,
)
from knowledge.rke2 import RKE2_NVIDIA_RUNTIMES

DCGM_METRICS_DIGEST_ANNOTATION: Final = "gpu-pool/dcgm-metrics-sha256"


# maxUnavailable is the string "0": the chart renders it with `| default "25%"` (templates/clusterpolicy.yaml,
# v26.3.2 and v26.7.0), and Sprig's default takes an integer 0 for empty, so 0 would silently become 25%. The
# string renders as a plain 0, which the CRD's int-or-string field takes as the integer 0.
# gpuPodDeletion (the chart copies it into the ClusterPolicy's upgradePolicy.podDeletion, templates/
# clusterpolicy.yaml; CRD v26.7.0: deleteEmptyDir boolean, timeoutSeconds integer >= 0) is as permissive and as
# patient as the wave's drain: with the chart's deleteEmptyDir false, k8s-operator-libs' SchedulePodEviction runs
# kubectl's localStorageFilter, which refuses a GPU pod with an emptyDir (a notebook's /dev/shm), and its 300 s
# timeout gives up on a PodDisruptionBudget the wave waits out: either marks the node upgrade-failed while the
# wave is still draining it (FIELD-REVIEW-5 WRONG-1). The wave also holds the operator off its node until its own
# drain is done (the skip label, rollout.wave_drain_command); this covers a node it acts on anyway.
DRIVER_UPGRADE_POLICY: Final[Mapping[str, Any]] = {
    "autoUpgrade": True,
    "maxUnavailable": "0",
    "gpuPodDeletion": {"deleteEmptyDir": True, "timeoutSeconds": DRAIN_TIMEOUT_SECONDS},
}


def _tolerations(*groups: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The union of toleration lists, first occurrence kept, no duplicates."""
    merged: list[dict[str, str]] = []
    for group in groups:
        for toleration in group:
            if dict(toleration) not in merged:
                merged.append(dict(toleration))
    return merged


def _toolkit_env(toolkit: ToolkitConfig) -> list[dict[str, str]]:
    # 'no runtime for "nvidia" is configured': RKE2's containerd listens under /run/k3s, not /run/containerd.
    # This is all RKE2's own guide sets (rke2-docs add-ons/gpu_operators.md, v26.3.x). Nothing else is set on
    # purpose: the toolkit writes its runtimes into a drop-in that RKE2's regenerated config.toml no longer
    # imports after the restart the toolkit itself triggers, and RKE2 registers the nvidia handlers on its own.
    return [{"name": "CONTAINERD_SOCKET", "value": toolkit.containerd_socket}]


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of a values overlay: mappings merge key by key, anything else is replaced.

    Returns new objects throughout, so neither input is shared with (or changed through) the result.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# One literal document, the chart's values key by key, each with the trap it avoids: split up, a key's reason would
# sit away from the keys beside it that the chart reads together.
def build_gpu_operator_values(
    cfg: GpuOperatorConfig,
    *,
    time_slicing_configmap: str,
    default_profile: str | None,
    dcgm_metrics_configmap: str,
    dcgm_metrics_digest: str,
    service_monitor: bool,
    gpu_node_tolerations: Sequence[Mapping[str, str]] = (),
    crds_registered: bool = False,
    service_monitor_labels: Mapping[str, str] | None = None,
    driver_env: Mapping[str, str] | None = None,
    repo_config: str | None = None,
    cert_config: str | None = None,
    driver_secret_env: str | None = None,
    driver_mounts_digest: str | None = None,
) -> dict[str, Any]:
    """The values of the gpu-operator release. Pure: same config in, same values out.

    `gpu_node_tolerations`: the taint the GPU nodes really carry, when it is not the chart's default.
    `crds_registered`: the program registers the chart's CRDs itself (a chart on disk), so the chart's
    pre-upgrade CRD hook is turned off; otherwise the hook stays on, the only thing that upgrades them.

    Never sets `operator.defaultRuntime` or `psp`: the chart no longer reads them.
    """
    if not time_slicing_configmap:
        raise ValueError("time_slicing_configmap must name the time-slicing ConfigMap")
    if not dcgm_metrics_configmap:
        raise ValueError("dcgm_metrics_configmap must name the DCGM custom-metrics ConfigMap")
    if not dcgm_metrics_digest:
        raise ValueError("dcgm_metrics_digest must be the digest of the DCGM metrics CSV")
    own_driver_env = [{"name": k, "value": v} for k, v in (driver_env or {}).items()]
    if driver_mounts_digest:
        own_driver_env.append({"name": DRIVER_MOUNTS_ENV, "value": driver_mounts_digest})
    values: dict[str, Any] = {
        # NVML mismatch after RKE2 regenerates config.toml: CDI injects devices from /etc/cdi through containerd
        # (2.0+, see knowledge/rke2.py) instead of relying on a patched runtime, and needs no nvidia default
        # runtime nor runtimeClassName. NRI stays off: it needs containerd 2.1 and is experimental.
        "cdi": {"enabled": True, "nriPluginEnabled": False},
        "daemonsets": {
            # Operands keep their place on a full node; an evicted driver pod takes the GPU with it.
            "priorityClassName": "system-node-critical",
            # Device plugin Pending on tainted GPU nodes ("Insufficient nvidia.com/gpu" with idle
            # cards): Helm replaces lists, so the chart's nvidia.com/gpu toleration is re-included.
            "tolerations": _tolerations(DAEMONSETS_DEFAULT_TOLERATIONS, gpu_node_tolerations),
        },
        "operator": {
            # The chart's default, set so extraValues cannot move it: the operands run with this RuntimeClass,
            # and on RKE2 only the handlers RKE2 registers itself exist ('no runtime for "<name>" is configured').
            "runtimeClass": RKE2_NVIDIA_RUNTIMES[0],
            # Helm installs crds/ once and never upgrades them: a stale CRD prunes every field the new operator
            # reads ("no device plugin, operator ready"). Either the program's CRD resources update them in the
            # plan (visible in make diff), or the chart's pre-upgrade hook (templates/upgrade_crd.yaml) does;
            # never both, two owners of one object fight on every upgrade.
            "upgradeCRD": not crds_registered,
        },
        "driver": {
            # Pinned and checked against the chart's supported drivers (article: 570.133.20 and the
            # R570 NVML bug, gpu-operator#1361).
            "version": cfg.driver_version,
            "kernelModuleType": cfg.kernel_module_type,
            # "distro 'ubuntu24.04' not supported": build from source unless asked otherwise.
            "usePrecompiled": cfg.use_precompiled,
            # Driver OOM-killed, exit 137: gcc compiling nvidia.ko needs more than 512Mi.
            "resources": cfg.driver_resources.as_values(),
            # A driver bump is one failure domain at a time, the wave's: with no slots of its own the operator's
            # upgrade controller starts no node itself and upgrades only nodes already cordoned, which is the
            # node the wave drains, and leaves it cordoned for the wave's gate (vendored k8s-operator-libs
            # pkg/upgrade GetUpgradesAvailable, ProcessUpgradeRequiredNodes; FIELD-REVIEW-4 WRONG-3). The chart's
            # 25% would start a node of its own choosing while the wave drains another.
            "upgradePolicy": copy.deepcopy(dict(DRIVER_UPGRADE_POLICY)),
            # Behind a proxy the driver container downloads the kernel headers it builds against through it
            # (NVIDIA's "GPU Operator in proxy environments": driver.env HTTPS_PROXY, HTTP_PROXY, NO_PROXY). Then
            # the digest of the ConfigMaps it mounts (DRIVER_MOUNTS_ENV): a new CA or mirror restarts the driver.
            **({"env": own_driver_env} if own_driver_env else {}),
            # A proxy with a login: its variables come from a Secret the operator adds to the driver container as
            # envFrom (`driver.secretEnv`, object_controls.go createSecretEnvReference), never from driver.env,
            # which the ClusterPolicy and the Helm values hold in clear (and which would override envFrom).
            **({"secretEnv": driver_secret_env} if driver_secret_env else {}),
            # A lab's own Ubuntu archive (gpu-pool:aptMirror): the ConfigMap of package sources the operator mounts
            # into the driver container (NVIDIA's air-gap guide; components/gpu_platform/apt_sources.py).
            **({"repoConfig": {"configMapName": repo_config}} if repo_config else {}),
            # The lab CA (gpu-pool:trustedCa), for an https package mirror under it (components/gpu_platform/
            # trusted_ca.py).
            **({"certConfig": {"name": cert_config}} if cert_config else {}),
        },
        "toolkit": {"env": _toolkit_env(cfg.toolkit)},
        "devicePlugin": {
            "config": {
                # The program creates this ConfigMap before the release, so the chart must not
                # (create false) and the plugin never points at a missing one (card 1 -> 0 GPUs).
                "create": False,
                "name": time_slicing_configmap,
                # Empty: a node without the nvidia.com/device-plugin.config label is not shared.
                "default": default_profile or "",
            }
        },
        # Standalone host engine off: the exporter embeds its own.
        "dcgm": {"enabled": False},
        "dcgmExporter": {
            # DCGM exporter OOM-killed right after "DCGM successfully initialized!": 256Mi is too little.
            "resources": cfg.dcgm_exporter_resources.as_values(),
            # The counters the dashboard and alerts query (key dcgm-metrics.csv, release namespace).
            "config": {"name": dcgm_metrics_configmap},
            # The operator mounts the CSV with subPath, and a subPath mount never sees a ConfigMap edit: the
            # digest in the pod template rolls the exporters whenever the metric list changes.
            "annotations": {DCGM_METRICS_DIGEST_ANNOTATION: dcgm_metrics_digest},
            # Without the ServiceMonitor CRD the operator keeps the ClusterPolicy notReady: the cluster preflight
            # refuses serviceMonitor: true on a cluster without it.
            "serviceMonitor": {"enabled": service_monitor},
        },
        # The A1000 has neither MIG nor vGPU; migManager and vgpuDeviceManager default to ON and would
        # run on every GPU node for nothing. Sandboxes, GPUDirect Storage and GDRCopy are not used.
        "migManager": {"enabled": False},
        "vgpuManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": False},
        "sandboxWorkloads": {"enabled": False},
        "gds": {"enabled": False},
        "gdrcopy": {"enabled": False},
        "node-feature-discovery": {
            "master": {
                # NFD's master without its control-plane toleration never labels anything, so nothing
                # else schedules. The article put this under `nfd.master`, which the subchart never
                # reads; the subchart's key is node-feature-discovery.master.
                "tolerations": _tolerations(NFD_MASTER_DEFAULT_TOLERATIONS, [CONTROL_PLANE_TOLERATION]),
            }
        },
    }
    _tolerate_the_nodes_taint_in_nfd_worker(values, gpu_node_tolerations)
    if service_monitor_labels:
        # A Prometheus selects ServiceMonitors by label (kube-prometheus-stack: release=<its name>); the operator
        # copies these onto the DCGM exporter's (object_controls.go applyServiceMonitorCustomEdits).
        values["dcgmExporter"]["serviceMonitor"]["additionalLabels"] = dict(sorted(service_monitor_labels.items()))
    merged = deep_merge(values, cfg.extra_values)
    # Helm replaces a list: extraValues.driver.env would drop the proxy's variables and the mounts' digest, so the
    # two are joined (the names gpu-pool:proxy sets are refused in extraValues: config/lab_rules.py).
    extra_driver = cfg.extra_values.get("driver")
    extra_env = extra_driver.get("env") if isinstance(extra_driver, Mapping) else None
    if own_driver_env and isinstance(extra_env, list):
        merged["driver"]["env"] = [*values["driver"]["env"], *copy.deepcopy(extra_env)]
    return merged


def _tolerate_the_nodes_taint_in_nfd_worker(
    values: dict[str, Any], gpu_node_tolerations: Sequence[Mapping[str, str]]
) -> None:
    """NFD's worker with the chart's tolerations plus the nodes' real taint, set only where the chart's list does
    not already cover it (a taint key or effect other than nvidia.com/gpu:NoSchedule): an NFD worker that cannot
    land on the GPU nodes never labels them, and no operand is ever scheduled there."""
    worker = _tolerations(NFD_WORKER_DEFAULT_TOLERATIONS, gpu_node_tolerations)
    if worker != [dict(t) for t in NFD_WORKER_DEFAULT_TOLERATIONS]:
        values["node-feature-discovery"]["worker"] = {"tolerations": worker}


def set_value_paths(values: Mapping[str, Any]) -> list[str]:
    """Every dotted leaf path set in a values tree, sorted; a list counts as its own path."""
    return sorted(path for path, _ in leaf_paths(values))
