"""`gpu-pool:monitoring`: the Grafana dashboard, the DCGM exporter's ServiceMonitor and the GPU alert rules."""

from __future__ import annotations

from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.validators import dns_label, labels


class AlertThresholds(ConfigModel):
    """When the GPU alerts fire. Defaults suit the article's RTX A1000s (GA107, 8 GB, 50 W, passively fed)."""

    gpu_temperature_celsius: int = Field(
        default=85,
        ge=40,
        le=110,
        strict=True,
        description="GpuTemperatureHigh fires above this core temperature (°C) for 5 minutes",
    )
    framebuffer_used_ratio: float = Field(
        default=0.95,
        gt=0,
        lt=1,
        strict=True,
        description="GpuFramebufferNearlyFull fires above this used/(used+free) ratio of GPU memory",
    )
    idle_gpu_hours: int = Field(
        default=24,
        ge=1,
        le=24 * 30,
        strict=True,
        description="GpuHeldWhileIdle: a pod has held a GPU at least this long and the card was idle all of it",
    )
    idle_utilisation_percent: int = Field(
        default=5,
        ge=1,
        le=99,
        strict=True,
        description="GpuHeldWhileIdle: 'idle' means utilisation never rose above this percent in the window",
    )
    xid_window_minutes: int = Field(
        default=15,
        ge=5,
        le=24 * 60,
        strict=True,
        description="GpuXidErrors fires for this long after a GPU reports a new XID error code",
    )


class MonitoringConfig(ConfigModel):
    dashboard_enabled: bool = Field(default=True, strict=True, description="ship the GPU Grafana dashboard")
    dashboard_namespace: str = Field(
        default="cattle-dashboards",
        description="namespace the Grafana dashboard sidecar watches (Rancher Monitoring: cattle-dashboards)",
    )
    dashboard_labels: dict[str, str] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"},
        min_length=1,
        description="labels the Grafana sidecar selects dashboard ConfigMaps by",
    )
    service_monitor: bool = Field(
        default=True,
        strict=True,
        description="have the GPU Operator create the DCGM exporter's ServiceMonitor (needs the Prometheus CRDs)",
    )
    service_monitor_labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra labels on the DCGM exporter's ServiceMonitor, e.g. what the Prometheus "
        "serviceMonitorSelector matches (kube-prometheus-stack: release: <its release name>)",
    )
    dcgm_exporter_job: str = Field(
        default="nvidia-dcgm-exporter",
        description="Prometheus `job` label of the DCGM exporter targets (the operator's ServiceMonitor sets "
        "jobLabel: app, and its Service is labelled app=nvidia-dcgm-exporter)",
    )
    alerts_enabled: bool = Field(default=True, strict=True, description="ship the GPU PrometheusRule")
    rules_namespace: str = Field(
        default="cattle-monitoring-system",
        description="namespace of the PrometheusRule (Rancher Monitoring: cattle-monitoring-system)",
    )
    rule_labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra labels on the PrometheusRule, e.g. what the Prometheus ruleSelector matches",
    )
    runbook_base_url: str = Field(
        default="https://github.com/gpu-pool/gpu-pool/blob/main/docs/alerts.md",
        description="page holding the alert runbooks; each alert links <this>#<anchor>",
    )
    thresholds: AlertThresholds = Field(default_factory=AlertThresholds, description="alert thresholds")

    @field_validator("dashboard_namespace", "rules_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return dns_label(value)

    @field_validator("dashboard_labels", "rule_labels", "service_monitor_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return labels(value)

    @field_validator("dcgm_exporter_job")
    @classmethod
    def _job(cls, value: str) -> str:
        if not value:
            raise ValueError("must name the DCGM exporter's Prometheus job, e.g. nvidia-dcgm-exporter")
        if '"' in value or "\\" in value or "\n" in value:
            raise ValueError("must not contain quotes, backslashes or newlines: it is used inside PromQL")
        return value

    @field_validator("runbook_base_url")
    @classmethod
    def _runbook(cls, value: str) -> str:
        parsed = urlparse(value)
        if parsed.scheme != "https" or not parsed.hostname:
            raise ValueError("must be an https:// URL of the page holding the runbooks")
        if parsed.fragment or value.endswith("#"):
            raise ValueError("must not contain '#': each alert appends its own #<anchor>")
        return value

    @model_validator(mode="after")
    def _alerts_need_metrics(self) -> MonitoringConfig:
        # A dead alert is worse than none (DESIGN §3): without the ServiceMonitor nothing scrapes
        # dcgm-exporter, so every DCGM alert would stay silent while looking armed.
        if self.service_monitor_labels and not self.service_monitor:
            raise ValueError(
                "serviceMonitorLabels has no effect with serviceMonitor false (there is no ServiceMonitor to label): "
                "remove it, or set serviceMonitor to true"
            )
        if self.alerts_enabled and not self.service_monitor:
            raise ValueError(
                "alertsEnabled needs serviceMonitor: without it nothing scrapes the DCGM exporter and the "
                "GPU alerts can never fire; set serviceMonitor to true or alertsEnabled to false"
            )
        return self
