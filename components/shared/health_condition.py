"""The Node condition the in-cluster health check writes (day2/doctor/health_check.py) and its alert reads
(components/gpu_platform/health_check.py): one name for both. Standard library only: the check runs without
the project's environment."""

from __future__ import annotations

# True: every floor doctor checks in the cluster is ok; False: the reason names the lowest broken floor.
CONDITION = "GpuPoolHealthy"
