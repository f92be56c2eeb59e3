"""The unattended repair's guard rails and circuit breaker, as pure data (the watcher's verdict on one node).

The watcher runs the same `decide` (day2/repair/decide.py) and the same repair turn as `gpu-pool repair`; this
module only says whether it may act unattended now, each refusal with a typed reason, as Cluster API's
MachineHealthCheck records its guard's verdict (machinehealthcheck_targets.go: a pure `needsRemediation`, typed
reasons, the verdict recorded on the object as a condition). The reason is written on the Node and as an Event.

Stricter than a person's repair, because no person looks: never while any other domain is out or any node of the
pool is held by a wave or a person's repair (not just `rollout.maxUnavailable`); only the decisions
`repair.unattended.decisions` lists; `repair.maxPerDay` per domain; and a pool-wide breaker that opens when
`breakerFailures` repairs within `breakerWindow` did not fix, and stays open until a person closes it
(`gpu-pool repair --reset-breaker --stack S`, recorded with who and when).

What the guard rails need of the stack is UnattendedFacts, computed from the config at preview and read back
from JSON: the watcher runs this module (and `decide`) without the pydantic-bound config, with the health check's
code packaging (components/shared/payload.py: the import closure and PyYAML's pure-Python modules).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from components.gpu_failure_domain.observed import ObservedNode
from config.window import window_hours
from day2.repair.decide import TIME_FORMAT, Decision, parse_time, power_cycles_within_a_day
from node.vocabulary import WATCHER_HOLDER_PREFIX

# Type-only (see the module's docstring): UnattendedFacts.of reads the stack's fields by name at preview.
if TYPE_CHECKING:
    from config.stack import StackConfig


class Reason(StrEnum):
    """Why the watcher did not repair a node now: one closed set, each recorded as-is on the Node and the Event."""

    NO_REPAIR_NEEDED = "NoRepairNeeded"
    NOT_A_POWER_CYCLE_FIX = "NotAPowerCycleFix"
    DECISION_NOT_UNATTENDED = "DecisionNotUnattended"
    NOT_ELIGIBLE = "NotEligible"
    ANOTHER_DOMAIN_OUT = "AnotherDomainOut"
    NODE_HELD = "NodeHeld"
    DAILY_BUDGET_SPENT = "DailyBudgetSpent"
    BREAKER_OPEN = "BreakerOpen"
    # Proxmox's view forbids it now: the VM locked, HA-managed, not the node's, the host reports its card, or
    # Proxmox (or the token's Secret) could not be read.
    HOST_REFUSES = "HostRefuses"
    # The repair token holds more than its role (someone widened it by hand): the watcher refuses to use it.
    TOKEN_BEYOND_ROLE = "TokenBeyondRole"


@dataclass(frozen=True)
class Refusal:
    reason: Reason
    message: str


@dataclass(frozen=True)
class Verdict:
    repair: bool
    refusals: tuple[Refusal, ...] = ()

    @property
    def reasons(self) -> tuple[Reason, ...]:
        return tuple(r.reason for r in self.refusals)


# ---------------------------------------------------------------------------------------------------- the facts


@dataclass(frozen=True)
class DomainFacts:
    name: str
    hostname: str
    proxmox_node: str


@dataclass(frozen=True)
class UnattendedFacts:
    """What the guard rails and the breaker read of the stack: `repair.unattended` and `repair.maxPerDay`, and each
    GPU domain's name, Node and Proxmox node, in failureDomains order."""

    decisions: tuple[str, ...]
    max_per_day: int
    breaker_failures: int
    breaker_window: str
    domains: tuple[DomainFacts, ...]

    @classmethod
    def of(cls, stack: StackConfig) -> UnattendedFacts:
        cfg = stack.repair.unattended
        return cls(
            decisions=tuple(cfg.decisions),
            max_per_day=stack.repair.max_per_day,
            breaker_failures=cfg.breaker_failures,
            breaker_window=cfg.breaker_window,
            domains=tuple(DomainFacts(d.name, d.hostname, d.proxmox_node) for d in stack.failure_domains),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "decisions": list(self.decisions),
            "maxPerDay": self.max_per_day,
            "breakerFailures": self.breaker_failures,
            "breakerWindow": self.breaker_window,
            "domains": [{"name": d.name, "hostname": d.hostname, "proxmoxNode": d.proxmox_node} for d in self.domains],
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> UnattendedFacts:
        """The facts as as_json wrote them; a missing or mistyped field raises (KeyError, TypeError, ValueError):
        the document is the stack's own, so a watcher that cannot read it must not repair."""
        facts = cls(
            decisions=tuple(str(d) for d in document["decisions"]),
            max_per_day=int(document["maxPerDay"]),
            breaker_failures=int(document["breakerFailures"]),
            breaker_window=str(document["breakerWindow"]),
            domains=tuple(
                DomainFacts(str(d["name"]), str(d["hostname"]), str(d["proxmoxNode"])) for d in document["domains"]
            ),
        )
        window_hours(facts.breaker_window)
        return facts

    def domain(self, name: str) -> DomainFacts:
        return next(d for d in self.domains if d.name == name)


# ---------------------------------------------------------------------------------------------------- the breaker


@dataclass(frozen=True)
class Failure:
    """A repair that did not fix: node-check or the smoke test failed after the power cycle."""

    at: str
    node: str
    why: str


@dataclass(frozen=True)
class Breaker:
    """Pool-wide, in the watcher's ConfigMap (components/unattended/objects.py BREAKER_CONFIGMAP)."""

    open: bool = False
    failures: tuple[Failure, ...] = ()
    opened_at: str = ""
    # The last close by a person: who and when (never by the watcher, never by time).
    reset_by: str = ""
    reset_at: str = ""


def within(failures: Sequence[Failure], window: str, now: datetime.datetime) -> list[Failure]:
    start = now - datetime.timedelta(hours=window_hours(window))
    return [f for f in failures if (at := parse_time(f.at)) is not None and start < at <= now]


def record_failure(breaker: Breaker, cfg: UnattendedFacts, failure: Failure, now: datetime.datetime) -> Breaker:
    """The breaker after a repair that did not fix: open once `breakerFailures` fall within `breakerWindow`. An
    open breaker stays open whatever the window: only a person closes it."""
    recent = within([*breaker.failures, failure], cfg.breaker_window, now)
    opens = breaker.open or len(recent) >= cfg.breaker_failures
    return replace(
        breaker,
        open=opens,
        failures=tuple(recent),
        opened_at=breaker.opened_at if breaker.open else (now.strftime(TIME_FORMAT) if opens else ""),
    )


def reset(breaker: Breaker, who: str, now: datetime.datetime) -> Breaker:
    """Closed by a person: the failures that opened it are forgotten, who closed it and when are kept."""
    return Breaker(open=False, failures=(), opened_at="", reset_by=who, reset_at=now.strftime(TIME_FORMAT))


def breaker_data(breaker: Breaker) -> dict[str, str]:
    """The ConfigMap's `data` (strings only)."""
    return {
        "state": "open" if breaker.open else "closed",
        "failures": json.dumps([f.__dict__ for f in breaker.failures], sort_keys=True),
        "openedAt": breaker.opened_at,
        "resetBy": breaker.reset_by,
        "resetAt": breaker.reset_at,
    }


def breaker_of(data: Mapping[str, str] | None) -> Breaker:
    """The breaker from its ConfigMap's `data`. Anything unreadable reads as open: a watcher that cannot tell
    whether its breaker is open must not repair (fail closed)."""
    if not data:
        return Breaker()
    state = data.get("state", "closed")
    try:
        raw = json.loads(data.get("failures") or "[]")
        failures = tuple(Failure(str(f["at"]), str(f["node"]), str(f["why"])) for f in raw)
    except (ValueError, TypeError, KeyError):
        return Breaker(open=True, opened_at=data.get("openedAt", ""))
    if state not in ("open", "closed"):
        return Breaker(open=True, failures=failures)
    return Breaker(
        state == "open", failures, data.get("openedAt", ""), data.get("resetBy", ""), data.get("resetAt", "")
    )


# ---------------------------------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Pool:
    """What the watcher observed: each domain's Node (None: not registered), by domain name."""

    nodes: Mapping[str, ObservedNode | None]
    breaker: Breaker = field(default_factory=Breaker)
    # Domains the stack's credential plan leaves to a person (components/unattended/credential.py), with why.
    not_eligible: Mapping[str, str] = field(default_factory=dict)


def _floor_of(decision: Decision) -> str:
    # decide() writes a repair's reason as `<floor>: <detail>`, the floor itself holding a colon (node:pci).
    return decision.reason.split(": ", 1)[0]


def verdict(cfg: UnattendedFacts, domain_name: str, decision: Decision, pool: Pool, now: datetime.datetime) -> Verdict:
    """Whether the watcher repairs `domain_name` now, and every reason it does not (all of them, not the first)."""
    domain = cfg.domain(domain_name)
    refusals: list[Refusal] = []
    if not decision.repair:
        reason = Reason.NO_REPAIR_NEEDED if decision.reason.startswith("no repair") else Reason.NOT_A_POWER_CYCLE_FIX
        return Verdict(False, (Refusal(reason, decision.reason),))
    floor = _floor_of(decision)
    if floor not in cfg.decisions:
        refusals.append(
            Refusal(
                Reason.DECISION_NOT_UNATTENDED,
                f"{floor} is not in gpu-pool:repair.unattended.decisions ({', '.join(cfg.decisions)}): "
                f"left to a person: gpu-pool repair {domain.hostname} --stack <stack>",
            )
        )
    refusals += standing_refusals(cfg, domain_name, pool, now)
    return Verdict(not refusals, tuple(refusals))


def standing_refusals(cfg: UnattendedFacts, domain_name: str, pool: Pool, now: datetime.datetime) -> list[Refusal]:
    """The guard rails that do not depend on the decision: the watcher checks them before it runs node-check on a
    marked node, so an open breaker or another domain out costs no Job on the node."""
    domain = cfg.domain(domain_name)
    refusals: list[Refusal] = []
    if domain_name in pool.not_eligible:
        refusals.append(Refusal(Reason.NOT_ELIGIBLE, pool.not_eligible[domain_name]))
    if pool.breaker.open:
        refusals.append(
            Refusal(
                Reason.BREAKER_OPEN,
                f"the unattended repair's breaker is open since {pool.breaker.opened_at or 'unknown'} "
                f"({len(pool.breaker.failures)} repairs did not fix): look at the hardware, then "
                "`gpu-pool repair --reset-breaker --stack <stack>`",
            )
        )
    others_out = [
        d.name for d in cfg.domains if d.name != domain_name and ((n := pool.nodes.get(d.name)) is None or n.out)
    ]
    if others_out:
        refusals.append(
            Refusal(
                Reason.ANOTHER_DOMAIN_OUT,
                f"{', '.join(others_out)} {'is' if len(others_out) == 1 else 'are'} out: unattended, one domain at a "
                f"time and only while every other serves; {domain.name} waits",
            )
        )
    held = [
        (d.hostname, n.turn_holder)
        for d in cfg.domains
        if (n := pool.nodes.get(d.name)) is not None and n.held and not n.turn_holder.startswith(WATCHER_HOLDER_PREFIX)
    ]
    if held:
        refusals.append(
            Refusal(
                Reason.NODE_HELD,
                "; ".join(f"{host} is held by {holder or 'an unnamed holder'}" for host, holder in held)
                + ": a wave or a person's repair is at work; the watcher waits until they are done",
            )
        )
    node = pool.nodes.get(domain_name)
    if node is not None:
        cycles = power_cycles_within_a_day(node, now)
        if len(cycles) >= cfg.max_per_day:
            refusals.append(
                Refusal(
                    Reason.DAILY_BUDGET_SPENT,
                    f"{domain.name}'s VM was power-cycled {len(cycles)} times in 24 hours ({', '.join(cycles)}) and "
                    f"gpu-pool:repair.maxPerDay is {cfg.max_per_day}: look at the hardware of "
                    f"{domain.proxmox_node}",
                )
            )
    return refusals
