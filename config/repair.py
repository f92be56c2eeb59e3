"""`gpu-pool:repair`: how often `gpu-pool repair` may power-cycle one domain's VM, and the optional in-cluster
health check that runs doctor on a schedule and alerts on a broken floor (the repair itself stays a human's)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.smoke_test import PINNED_IMAGE
from config.validators import dns_label

# The Docker official image: python3 and the standard library, which is all the health check runs on (the
# stack hands it its code in a ConfigMap), so no image has to be built.
HEALTH_CHECK_IMAGE = "python:3.12-slim"
# Minute and hour in cron syntax (`*`, a number, a range, a list, a step), then every day of every month: the
# check runs every day, so how stale its last run may be follows from the two fields (GpuPoolHealthCheckNotRunning).
_CRON_FIELD = r"(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*"
CRON = re.compile(rf"^(?P<minute>{_CRON_FIELD}) (?P<hour>{_CRON_FIELD}) \* \* \*$")


def _expand(field: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        else:
            first_text, _, last_text = span.partition("-")
            first = int(first_text)
            last = int(last_text) if last_text else (high if step else first)
        if not low <= first <= last <= high or (step and int(step) < 1):
            raise ValueError(f"{part!r} is not a value or step within {low}-{high}")
        values |= set(range(first, last + 1, int(step) if step else 1))
    return values


def longest_gap_minutes(schedule: str) -> int:
    """The longest wait between two runs of a daily schedule (across midnight too)."""
    match = CRON.match(schedule)
    if match is None:
        raise ValueError(f"{schedule!r} is not a daily cron schedule")
    times = sorted(h * 60 + m for h in _expand(match["hour"], 0, 23) for m in _expand(match["minute"], 0, 59))
    return max(later - earlier for earlier, later in zip(times, [*times[1:], times[0] + 24 * 60], strict=True))


class HealthCheckConfig(ConfigModel):
    """A CronJob that runs doctor's cluster floors in the cluster and writes each GPU node's verdict as the node
    condition GpuPoolHealthy, which kube-state-metrics exports and an alert rule reads. No Proxmox credential
    lives in the cluster: the alert's runbook names the `gpu-pool repair` command a human runs."""

    enabled: bool = Field(default=False, description="deploy the health-check CronJob and its alert rule")
    schedule: str = Field(
        default="*/10 * * * *",
        description="when it runs, in cron syntax: minute and hour, every day (the last three fields are `* * *`)",
    )
    image: str = Field(
        default=HEALTH_CHECK_IMAGE,
        description="an image with python3 (3.11 or newer) on PATH, pinned by tag or digest; nothing else is needed",
    )
    namespace: str = Field(
        default="gpu-pool-health", description="namespace the stack creates for it (Pod Security restricted)"
    )

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        if not CRON.match(value):
            raise ValueError(
                "is not a daily cron schedule: minute and hour, then `* * *`, e.g. '*/10 * * * *' (every 10 minutes)"
            )
        try:
            longest_gap_minutes(value)
        except ValueError as error:
            raise ValueError(f"is not a cron schedule: {error}") from None
        return value

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        last = value.rsplit("/", 1)[-1]
        if (":" not in last and "@" not in last) or last.endswith(":latest") or not PINNED_IMAGE.match(value):
            raise ValueError(f"must be an image pinned by tag or digest, e.g. {HEALTH_CHECK_IMAGE}")
        return value


class RepairConfig(ConfigModel):
    max_per_day: int = Field(
        default=2,
        ge=1,
        le=24,
        strict=True,
        description="power cycles `gpu-pool repair` may make of one domain's VM in 24 hours; beyond that it refuses "
        "and says to look at the hardware",
    )
    allow_ha_managed: bool = Field(
        default=False,
        description="repair a VM Proxmox HA manages: its stop and start become HA requests the CRM places, and the "
        "repair checks afterwards that the VM runs on the domain's proxmoxNode (off: such a VM is refused)",
    )
    health_check: HealthCheckConfig = Field(
        default_factory=HealthCheckConfig,
        description="run doctor in the cluster on a schedule and alert on a broken floor (off by default)",
    )
