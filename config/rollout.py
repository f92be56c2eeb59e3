"""`gpu-pool:rollout`: how a change that disrupts GPU workers goes through the failure domains."""

from __future__ import annotations

from pydantic import Field

from config.base import ConfigModel


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
