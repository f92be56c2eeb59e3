"""Sharing profiles: how many schedulable `nvidia.com/gpu` one physical card advertises."""

from __future__ import annotations

from pydantic import Field

from config.base import ConfigModel


class SharingProfile(ConfigModel):
    """One key of the time-slicing ConfigMap. `replicas: 1` means the whole card, unshared.

    Time-slicing is oversubscription, not partitioning: no memory or fault isolation between
    the pods that share a card (article, "Sharing the cards").
    """

    replicas: int = Field(ge=1, le=64, strict=True, description="schedulable GPUs this card advertises")
