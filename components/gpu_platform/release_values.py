"""The gpu-operator release's final values from the stack config: what GpuPlatform installs, and what the rendered
plan's invariant pass (components/rendered_plan.py) checks. One function, so the two can never differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.gpu_platform.dcgm_metrics import (
    DCGM_METRICS_CONFIGMAP,
    build_dcgm_metrics_csv,
    deployed_exporter_version,
    metrics_digest,
)
from components.gpu_platform.operator_crds import build_operator_crds
from components.gpu_platform.operator_values import build_gpu_operator_values
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.node_marking import GpuNodeMarking
from config.gpu_operator import GpuOperatorConfig
from config.kyverno import KyvernoConfig
from config.monitoring import MonitoringConfig
from config.proxy import ProxyConfig, proxy_environment
from config.rke2 import Rke2Config

# The Secret that carries the proxy's variables, login included, to the driver container (proxy.login).
DRIVER_PROXY_SECRET = "gpu-pool-driver-proxy"


def driver_proxy(proxy: ProxyConfig | None, rke2: Rke2Config) -> tuple[dict[str, str], str | None]:
    """The driver container's proxy: (driver.env's variables, driver.secretEnv's Secret). With a login, all of them
    move to the Secret: no proxy variable stays in driver.env, which would override the Secret's."""
    if proxy is not None and proxy.enabled and proxy.login:
        return {}, DRIVER_PROXY_SECRET
    return proxy_environment(proxy, rke2), None


def nfd_enabled(operator: GpuOperatorConfig) -> bool:
    """Whether the chart installs its NFD subchart (`nfd.enabled`, true unless extraValues turns it off)."""
    nfd = operator.extra_values.get("nfd")
    return not (isinstance(nfd, dict) and nfd.get("enabled") is False)


def registered_crds(operator: GpuOperatorConfig) -> list[dict[str, Any]]:
    """The chart's CRDs the program registers itself: every one of a chart on disk, none from the repository."""
    chart = operator.local_chart()
    return [] if chart is None else build_operator_crds(chart, nfd_enabled=nfd_enabled(operator))


def gpu_node_tolerations(marking: GpuNodeMarking) -> list[dict[str, str]]:
    """What tolerates the taint the GPU nodes really carry (Exists: any value)."""
    return [{"key": marking.taint_key, "operator": "Exists", "effect": marking.taint_effect}]


def release_values(
    operator: GpuOperatorConfig,
    kyverno: KyvernoConfig,
    monitoring: MonitoringConfig,
    *,
    crds_registered: bool | None = None,
    driver_env: Mapping[str, str] | None = None,
    repo_config: str | None = None,
    cert_config: str | None = None,
    driver_secret_env: str | None = None,
    driver_mounts_digest: str | None = None,
) -> dict[str, Any]:
    """The values of the gpu-operator release, every key merged (extraValues last). Pure. `driver_env`: the
    proxy's variables (config.proxy.proxy_environment), for the driver container's package downloads;
    `driver_mounts_digest`: the content of the ConfigMaps the driver mounts (driver_template.mounts_digest)."""
    return build_gpu_operator_values(
        operator,
        time_slicing_configmap=TIME_SLICING_CONFIGMAP,
        default_profile=None,
        dcgm_metrics_configmap=DCGM_METRICS_CONFIGMAP,
        dcgm_metrics_digest=metrics_digest(build_dcgm_metrics_csv(deployed_exporter_version(operator))),
        service_monitor=monitoring.service_monitor,
        gpu_node_tolerations=gpu_node_tolerations(GpuNodeMarking.from_kyverno(kyverno)),
        crds_registered=bool(registered_crds(operator)) if crds_registered is None else crds_registered,
        service_monitor_labels=monitoring.service_monitor_labels,
        driver_env=driver_env,
        repo_config=repo_config,
        cert_config=cert_config,
        driver_secret_env=driver_secret_env,
        driver_mounts_digest=driver_mounts_digest,
    )
