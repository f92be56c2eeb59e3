"""GpuPlatform: the cluster-wide GPU tier (operator, sharing, steering, metrics, dashboard, alerts, quotas)."""

from components.gpu_platform.component import GpuPlatform, GpuPlatformArgs

__all__ = ["GpuPlatform", "GpuPlatformArgs"]
