"""`gpu-pool:rollout`: how a change that disrupts GPU workers goes through the failure domains."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from config.base import ConfigModel

# How long a wave's drain waits for pods to leave (PodDisruptionBudgets respected, evictions retried). The GPU
# Operator's own GPU-pod deletion is given at least as long (components/gpu_platform/operator_values.py), or a
# PDB it waits out longer than its 300 s default marks the node upgrade-failed (FIELD-REVIEW-5 WRONG-1).
DRAIN_TIMEOUT_SECONDS: Final = 900


class RolloutConfig(ConfigModel):
    """One failure domain at a time by default: each drains, changes, passes its gates and is uncordoned before the
    next starts, so a failed domain stops the wave while the rest of the pool still serves."""

    order: list[str] | None = Field(
        default=None,
        description="domain names in the order a day-2 wave goes through them; domains not listed follow in "
        "failureDomains order (default: the failureDomains order)",
    )
    max_unavailable: int = Field(
        default=1,
        ge=1,
        strict=True,
        description="how many domains a wave drains at the same time (1: one failure domain at a time)",
    )
