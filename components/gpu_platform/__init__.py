"""GpuPlatform (component.py): the cluster-wide GPU tier (operator, sharing, steering, metrics, dashboard, alerts,
quotas). The other modules are pure builders; importing one of them loads no Pulumi SDK."""
