"""`gpu-pool:repair`: how often `gpu-pool repair` may power-cycle one domain's VM, the optional in-cluster
health check that runs doctor on a schedule and alerts on a broken floor, and the opt-in unattended repair
(`repair.unattended`) that runs the same decision and turn from a watcher in the cluster."""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.smoke_test import PINNED_IMAGE
from config.validators import own_namespace
from config.window import WINDOW, window_hours

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


# The payloads (doctor, the watcher, node-check) use the standard library of Python 3.11 (tomllib, `Self`, the
# `match` statements and exception groups of 3.10 and 3.11).
PAYLOAD_PYTHON = (3, 11)
# The Python release a tag of the official image (or an image named python) says: `3.9-slim`, `3.12.4-bookworm`.
_PYTHON_TAG = re.compile(r"^(?:.*/)?python:(?P<major>\d+)\.(?P<minor>\d+)(?:[.-]|$)")


def pinned_image(value: str) -> str:
    last = value.rsplit("/", 1)[-1]
    if (":" not in last and "@" not in last) or last.endswith(":latest") or not PINNED_IMAGE.match(value):
        raise ValueError(f"must be an image pinned by tag or digest, e.g. {HEALTH_CHECK_IMAGE}")
    python = _PYTHON_TAG.match(value.split("@", 1)[0])
    if python and (int(python["major"]), int(python["minor"])) < PAYLOAD_PYTHON:
        need = ".".join(map(str, PAYLOAD_PYTHON))
        raise ValueError(
            f"runs Python {python['major']}.{python['minor']}, and the payloads need {need} or newer (they fail at "
            f"import in the pod): pin e.g. {HEALTH_CHECK_IMAGE}"
        )
    return value


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

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: own_namespace(v, "gpu-pool-health")))

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

    _image = field_validator("image")(classmethod(lambda cls, v: pinned_image(v)))


# The broken floors (node-check's, as doctor names them) whose fix a power cycle of the VM can be
# (day2/node_check/floors.py sets `power_cycle` only on these: a card off the bus, NVML unable to initialise it, an
# Xid whose catalogue action resets the GPU); `gpu-pool repair` runs with exit 0 on no other decision.
PowerCycleFloor = Literal["node:pci", "node:nvml", "node:health"]
POWER_CYCLE_FLOORS: tuple[PowerCycleFloor, ...] = get_args(PowerCycleFloor)
WATCHER_IMAGE = HEALTH_CHECK_IMAGE


class UnattendedConfig(ConfigModel):
    """A watcher in the cluster repairs a faulted card's VM without a person, by the same `decide` and the same
    repair turn as `gpu-pool repair`, behind guard rails and a pool-wide circuit breaker, with a Proxmox token the
    stack creates that can only power-cycle and read the GPU domains' VMs and read their PCI mappings."""

    enabled: bool = Field(
        default=False,
        description="deploy the repair watcher and its least-privilege Proxmox token: a marked node's card is "
        "power-cycled with no person at hand, one domain at a time, behind a breaker (docs/day2.md)",
    )
    decisions: list[PowerCycleFloor] = Field(
        default_factory=lambda: list(POWER_CYCLE_FLOORS),
        min_length=1,
        description="the broken floors the watcher may repair unattended (node-check's floors whose fix is a power "
        "cycle); any other finding is left to a person",
    )
    breaker_failures: int = Field(
        default=2,
        ge=1,
        le=10,
        strict=True,
        description="repairs that did not fix (node-check or the smoke test failing after the power cycle) within "
        "breakerWindow that open the pool-wide breaker; it stays open until `gpu-pool repair --reset-breaker`",
    )
    breaker_window: str = Field(
        default="24h", description="how far back failed repairs count toward the breaker, in hours or days (24h, 7d)"
    )
    namespace: str = Field(
        default="gpu-pool-repair", description="namespace the stack creates for the watcher (Pod Security restricted)"
    )
    node_check_namespace: str = Field(
        default="gpu-pool-node-check",
        description="namespace for the node-check Jobs, labelled for the privileged Pod Security level (they read "
        "the host's /sys, /proc and kernel log read-only)",
    )
    image: str = Field(
        default=WATCHER_IMAGE,
        description="an image with python3 (3.11 or newer) on PATH, pinned by tag or digest, for the watcher and "
        "the node-check Job; the stack hands them their code in a ConfigMap",
    )
    token_generation: int = Field(
        default=1,
        ge=1,
        strict=True,
        description="raise it to replace the watcher's Proxmox token (a new secret, the old one deleted)",
    )

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: own_namespace(v, "gpu-pool-repair")))
    _node_check_namespace = field_validator("node_check_namespace")(
        classmethod(lambda cls, v: own_namespace(v, "gpu-pool-node-check"))
    )
    _image = field_validator("image")(classmethod(lambda cls, v: pinned_image(v)))

    @field_validator("breaker_window")
    @classmethod
    def _window(cls, value: str) -> str:
        if not WINDOW.match(value):
            raise ValueError("is not a window of whole hours or days: e.g. 24h, 72h or 7d")
        if window_hours(value) > 90 * 24:
            raise ValueError("is longer than 90d: a breaker that remembers longer never forgets a fixed card")
        return value

    @field_validator("decisions")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        twice = sorted({d for d in value if value.count(d) > 1})
        if twice:
            raise ValueError(f"names {', '.join(twice)} more than once: list each floor once")
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
    unattended: UnattendedConfig = Field(
        default_factory=UnattendedConfig,
        description="repair a faulted card's VM from the cluster without a person (off by default; needs "
        "healthCheck.enabled)",
    )

    @model_validator(mode="after")
    def _unattended_needs_the_health_check(self) -> RepairConfig:
        # The watcher acts on the health check's node condition: without the CronJob nothing marks a node, and an
        # enabled watcher with a Proxmox token would sit in the cluster doing nothing but hold a credential.
        if self.unattended.enabled and not self.health_check.enabled:
            raise ValueError(
                "repair.unattended.enabled is true but repair.healthCheck.enabled is not: the watcher repairs the "
                "nodes the health check marks; set repair.healthCheck.enabled: true too, or "
                "repair.unattended.enabled: false"
            )
        return self
