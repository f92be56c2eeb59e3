"""Which Kubeflow notebooks to stop because they sit on an idle GPU while others wait: one pure function, `judge`,
from the cluster's objects (pods, Nodes, Notebooks, Namespaces, ResourceQuotas), what DCGM saw of each card
(day2/reclaim/evidence.py) and the policy (reclaim.idleNotebooks), to one typed decision per notebook. The policy in
the cluster acts on it and `gpu-pool claims --reclaimable` prints it: the same function on the same data.

Shaped after Cluster API's MachineHealthCheck (a pure verdict with a typed reason; the guard's verdict recorded on the
object): every decision is an Action and a Reason with a sentence, and what the policy has done is read back from the
Notebooks' own annotations (components/reclaim/names.py), so a pass needs no memory of the previous one.

Evidence, not guesses:
- idle means every card the notebook's pod holds stayed below the threshold for the whole window, which the pod held
  all of; a card whose series is missing, or covers less than the window, is "unknown", never idle;
- a whole card is the pod's when dcgm-exporter names the pod on it; a time-sliced card is judged only when every pod
  on its node is a notebook (the exporter names one of the pods sharing a card, and the card's utilisation is all of
  theirs), else it is "ambiguous" and left alone;
- contention is a pod Pending for nvidia.com/gpu that the freed slots would let schedule (it needs more than any node
  has free now, and no more than the notebook's node would have), or the notebook's namespace at its GPU quota;
- one stop at a time: while a stopped notebook's pod still holds its card, no other notebook is stopped, and a pod
  held past the deadline is reported with its finalizers (the article: replicas=0 is not proof a card came back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from components.reclaim.names import (
    RECLAIMED_AT,
    RECLAIMED_NODE,
    RECLAIMED_POD,
    STOP_AFTER,
    WARNED_AT,
)
from day2 import objects as o
from day2.claims.compute import (
    ClaimsOptions,
    bound_since,
    compute_claims,
    holds_gpus,
    is_terminating,
    is_waiting,
    pod_gpus,
    quantity,
)
from day2.reclaim.evidence import CardSeries, Evidence
from knowledge.gpu_operator import GPU_COUNT_LABEL, GPU_REPLICAS_LABEL, GPU_RESOURCE
from knowledge.kubeflow import NOTEBOOK_NAME_LABEL, STOP_ANNOTATION

QUOTA_KEY = f"requests.{GPU_RESOURCE}"
# A window's series may miss this share of its minutes and still be evidence for all of it (an exporter restart, a
# scrape lost), but never less than two samples: the rule group's evaluations fall at an offset within the minute.
GAP_SHARE = 0.02
MIN_GAP_SAMPLES = 2


class Action(StrEnum):
    STOP = "stop"  # set Kubeflow's stop annotation now
    WARN = "warn"  # warn now: an Event and the annotations naming when it will be stopped
    WAIT = "wait"  # warned; the grace runs
    LEAVE = "leave"


class Reason(StrEnum):
    IDLE = "idle"  # stop, warn or wait: idle over the whole window, and wanted
    BUSY = "busy"
    EXCLUDED = "excluded"
    UNKNOWN_SERIES = "unknown-series"
    AMBIGUOUS_CARD = "ambiguous-card"
    HELD_UNDER_WINDOW = "held-under-window"
    NOT_CONTENDED = "not-contended"
    NOT_NEEDED = "not-needed"  # there is contention, but this stop would serve none of it
    RATE_LIMITED = "rate-limited"
    CARD_NOT_BACK = "card-not-back"  # an earlier stop's card has not come back
    STOPPING = "stopping"  # this notebook was stopped by the policy; its pod still holds the card
    STOPPED = "stopped"
    NO_GPU = "no-gpu"
    GOING = "going"  # its pod is being deleted by someone else


# The reasons that keep a warning standing: the notebook is still idle and wanted, only its stop has to wait.
KEEPS_WARNING = frozenset({Reason.IDLE, Reason.CARD_NOT_BACK, Reason.RATE_LIMITED})


@dataclass(frozen=True)
class Policy:
    """reclaim.idleNotebooks as the judgement reads it (plain data: the policy's payload runs without pydantic)."""

    idle_hours: int
    idle_percent: float
    only_when_contended: bool = True
    grace_minutes: int = 60
    exclusion_label: str = "gpu-pool.dev/keep-gpu"
    max_per_hour: int = 2
    card_back_minutes: int = 15

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Policy:
        return cls(
            idle_hours=int(document["idleHours"]),
            idle_percent=float(document["idleUtilisationPercent"]),
            only_when_contended=bool(document["onlyWhenContended"]),
            grace_minutes=int(document["graceMinutes"]),
            exclusion_label=str(document["exclusionLabel"]),
            max_per_hour=int(document["maxPerHour"]),
            card_back_minutes=int(document["cardBackMinutes"]),
        )


@dataclass(frozen=True)
class Decision:
    """One notebook's verdict. `gpus`: the slots its pod holds; `gpu_share`: the physical GPUs they are (a slot of a
    card time-sliced 4 ways is 0.25); `stop_at`: when a warned notebook is stopped; `withdraw_warning`: a warning it
    carries no longer holds."""

    namespace: str
    notebook: str
    action: Action
    reason: Reason
    detail: str
    pod: str | None = None
    node: str | None = None
    gpus: int = 0
    gpu_share: float = 0.0
    held_seconds: int = 0
    peak_percent: float | None = None
    stop_at: datetime | None = None
    withdraw_warning: bool = False


@dataclass(frozen=True)
class NotBack:
    """A notebook the policy stopped whose pod still holds its card (`since`: the stop)."""

    namespace: str
    notebook: str
    pod: str
    node: str
    gpus: int
    since: datetime
    terminating: bool
    finalizers: tuple[str, ...]
    past_deadline: bool


@dataclass(frozen=True)
class Waiter:
    namespace: str
    pod: str
    gpus: int


@dataclass(frozen=True)
class Judgement:
    decisions: tuple[Decision, ...]
    not_back: tuple[NotBack, ...]
    # Nodes whose cards the pass could not judge, with how many cards each has.
    ambiguous: Mapping[str, int]
    # The contention seen: pods no node has room for, and namespaces at their GPU quota.
    waiting: tuple[Waiter, ...]
    full_quotas: tuple[str, ...]
    stops_last_hour: int


@dataclass(frozen=True)
class _Candidate:
    """An idle notebook: what would be stopped, were it wanted."""

    notebook: Mapping[str, Any]
    pod: str
    node: str
    gpus: int
    gpu_share: float
    held_seconds: int
    peak: float
    warned_at: datetime | None
    stop_at: datetime | None


# ----------------------------------------------------------------------------------------------------- the cluster


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (o.namespace(obj), o.name(obj))


def slots_per_card(node: Mapping[str, Any] | None) -> int | None:
    """The node's time-slicing replicas (GFD's `nvidia.com/gpu.replicas`), else allocatable / cards; None when the
    node does not say (then its cards are judged as shared, the careful reading)."""
    if node is None:
        return None
    labels = o.labels(node)
    replicas = labels.get(GPU_REPLICAS_LABEL, "")
    if replicas.isdigit() and int(replicas) >= 1:
        return int(replicas)
    count, advertised = labels.get(GPU_COUNT_LABEL, ""), o.allocatable(node, GPU_RESOURCE)
    if count.isdigit() and int(count) >= 1 and advertised is not None:
        per_card = int(quantity(advertised)) // int(count)
        return per_card if per_card >= 1 else None
    return None


def _excluded(notebook: Mapping[str, Any], namespaces: Mapping[str, Mapping[str, Any]], label: str) -> str | None:
    if o.labels(notebook).get(label) == "true":
        return f"the Notebook is labelled {label}=true"
    namespace = namespaces.get(o.namespace(notebook))
    if namespace is not None and o.labels(namespace).get(label) == "true":
        return f"its namespace {o.namespace(notebook)} is labelled {label}=true"
    return None


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _is_ours(notebook: Mapping[str, Any]) -> bool:
    """Stopped by the policy: its record of the stop carries the stop annotation's own time."""
    notes = o.annotations_of(notebook)
    return STOP_ANNOTATION in notes and notes.get(RECLAIMED_AT) == notes[STOP_ANNOTATION]


def _pods_of(notebook: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    namespace, name = _key(notebook)
    return [p for p in pods if o.namespace(p) == namespace and o.labels(p).get(NOTEBOOK_NAME_LABEL) == name]


def not_back_of(
    notebooks: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], policy: Policy, now: datetime
) -> tuple[NotBack, ...]:
    """The policy's stops whose pod still holds its card: the pod it recorded, on the node it recorded, bound and not
    finished (a Terminating pod holds its card until it is gone, as the scheduler counts)."""
    found: list[NotBack] = []
    by_key = {_key(p): p for p in pods}
    for notebook in notebooks:
        if not _is_ours(notebook):
            continue
        notes = o.annotations_of(notebook)
        pod = by_key.get((o.namespace(notebook), notes.get(RECLAIMED_POD, "")))
        since = o.parse_time(notes.get(RECLAIMED_AT))
        if pod is None or since is None or not holds_gpus(pod) or o.bound_node(pod) != notes.get(RECLAIMED_NODE):
            continue
        found.append(
            NotBack(
                namespace=o.namespace(notebook),
                notebook=o.name(notebook),
                pod=o.name(pod),
                node=o.bound_node(pod) or "",
                gpus=pod_gpus(pod),
                since=since,
                terminating=is_terminating(pod),
                finalizers=o.finalizers(pod),
                past_deadline=now - since >= timedelta(minutes=policy.card_back_minutes),
            )
        )
    return tuple(sorted(found, key=lambda n: (n.namespace, n.notebook)))


def stops_since(notebooks: Sequence[Mapping[str, Any]], since: datetime) -> int:
    """The policy's stops recorded after `since` (a notebook restarted since keeps its record, and still counts)."""
    times = (o.parse_time(o.annotations_of(n).get(RECLAIMED_AT)) for n in notebooks)
    return sum(1 for at in times if at is not None and at > since)


# ----------------------------------------------------------------------------------------------------- contention


@dataclass(frozen=True)
class _Contention:
    free: Mapping[str, int]  # slots free per GPU node, counting the slots of stops not back yet as coming back
    waiting: tuple[Waiter, ...]  # pods no node has room for, even once those slots are back
    full_quotas: tuple[str, ...]
    # The contention a stop not back yet serves: pods that wait for its slots, namespaces whose quota it will free.
    covered: tuple[Waiter, ...] = ()
    covered_quotas: tuple[str, ...] = ()
    now_free: Mapping[str, int] | None = None  # slots free per node now, as the scheduler counts them


def _scheduler_tried(pod: Mapping[str, Any]) -> bool:
    scheduled = o.condition(pod, "PodScheduled")
    return scheduled is not None and scheduled.get("status") == "False"


def _full_quotas(quotas: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Namespaces with a GPU quota above zero that is used up (zero forbids GPUs: no one there waits for one)."""
    full: set[str] = set()
    for quota in quotas:
        hard = o.status(quota).get("hard") or o.spec(quota).get("hard") or {}
        used = o.status(quota).get("used") or {}
        if not isinstance(hard, Mapping) or QUOTA_KEY not in hard or not isinstance(used, Mapping):
            continue
        limit = quantity(hard[QUOTA_KEY])
        if limit > 0 and quantity(used.get(QUOTA_KEY, "0")) >= limit:
            full.add(o.namespace(quota))
    return tuple(sorted(full))


def contention(snapshot: o.Snapshot, not_back: Sequence[NotBack], now: datetime) -> _Contention:
    """What the pool lacks: free slots per node as claims counts them (from pods), the slots of the policy's stops
    not back yet added as coming; the pods the scheduler could not place that need more than any node will have."""
    claims = compute_claims(snapshot, ClaimsOptions(now=now))
    now_free = {n.name: n.free for n in claims.nodes}
    free = dict(now_free)
    for stop in not_back:
        free[stop.node] = free.get(stop.node, 0) + stop.gpus
    tried = [
        Waiter(o.namespace(p), o.name(p), pod_gpus(p))
        for p in sorted(snapshot.pods, key=lambda p: (str(o.metadata(p).get("creationTimestamp", "")), _key(p)))
        if is_waiting(p) and _scheduler_tried(p)
    ]
    most, most_now = max(free.values(), default=0), max(now_free.values(), default=0)
    coming = {stop.namespace for stop in not_back}
    full = _full_quotas(snapshot.quotas)
    return _Contention(
        free=free,
        waiting=tuple(w for w in tried if w.gpus > most),
        full_quotas=tuple(ns for ns in full if ns not in coming),
        covered=tuple(w for w in tried if most_now < w.gpus <= most),
        covered_quotas=tuple(ns for ns in full if ns in coming),
        now_free=now_free,
    )


# ----------------------------------------------------------------------------------------------------- the cards


@dataclass(frozen=True)
class _CardVerdict:
    reason: Reason  # IDLE, BUSY, UNKNOWN_SERIES or AMBIGUOUS_CARD
    detail: str
    peak: float | None = None


def _required(evidence: Evidence) -> int:
    return evidence.minutes - max(MIN_GAP_SAMPLES, int(evidence.minutes * GAP_SHARE))


def _sharers(pod: Mapping[str, Any], node: str, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    found = [p for p in pods if o.bound_node(p) == node and holds_gpus(p) and _key(p) != _key(pod)]
    return sorted(found, key=_key)


def _considered(
    pod: Mapping[str, Any], node: str, replicas: int | None, cards: tuple[CardSeries, ...], pods: Sequence[Any]
) -> tuple[CardSeries, ...] | _CardVerdict:
    """The cards the pod's verdict rests on, or why there are none to rest on."""
    gpus = pod_gpus(pod)
    if replicas == 1:
        mine = tuple(c for c in cards if _key(pod) in c.holders)
        if len(mine) < gpus:
            return _CardVerdict(
                Reason.UNKNOWN_SERIES,
                f"dcgm-exporter names the pod on {len(mine)} of the {gpus} card(s) it holds on {node}",
            )
        return mine
    strangers = [p for p in _sharers(pod, node, pods) if not o.labels(p).get(NOTEBOOK_NAME_LABEL)]
    if strangers:
        shared = "time-sliced" if replicas else "possibly shared (the node does not say how it is sliced)"
        names = ", ".join(f"{o.namespace(p)}/{o.name(p)}" for p in strangers)
        return _CardVerdict(
            Reason.AMBIGUOUS_CARD,
            f"{node}'s cards are {shared} and held with {names}, not a notebook: the card's utilisation is theirs "
            "too, so it says nothing of this notebook alone",
        )
    return cards


def card_verdict(
    pod: Mapping[str, Any], node: Mapping[str, Any] | None, node_name: str, world: o.Snapshot, evidence: Evidence,
    percent: float,
) -> _CardVerdict:  # fmt: skip
    """Whether the cards the pod holds were idle over the whole window, on the evidence."""
    cards = evidence.on(node_name)
    if not cards:
        return _CardVerdict(Reason.UNKNOWN_SERIES, f"Prometheus has no card series for {node_name}")
    replicas = slots_per_card(node)
    considered = _considered(pod, node_name, replicas, cards, world.pods)
    if isinstance(considered, _CardVerdict):
        return considered
    required = _required(evidence)
    short = [c for c in considered if c.samples < required]
    if short:
        card = short[0]
        return _CardVerdict(
            Reason.UNKNOWN_SERIES,
            f"card {card.gpu} of {node_name} was recorded {card.samples} of the window's {evidence.minutes} minutes",
        )
    peaks = [c.peak for c in considered]
    if all(p < percent for p in peaks):
        return _CardVerdict(Reason.IDLE, "", max(peaks))
    if replicas != 1 and any(p < percent for p in peaks):
        return _CardVerdict(
            Reason.AMBIGUOUS_CARD,
            f"{node_name}'s cards are time-sliced and disagree (peaks {', '.join(f'{p:g}%' for p in peaks)}): which "
            "card the pod uses cannot be told",
        )
    return _CardVerdict(Reason.BUSY, f"its card peaked at {max(peaks):g}% (idle is under {percent:g}%)", max(peaks))


# ----------------------------------------------------------------------------------------------------- one notebook


def _leave(notebook: Mapping[str, Any], reason: Reason, detail: str, **evidence: Any) -> Decision:
    namespace, name = _key(notebook)
    warned = WARNED_AT in o.annotations_of(notebook)
    return Decision(namespace, name, Action.LEAVE, reason, detail, withdraw_warning=warned, **evidence)


def _stopped(notebook: Mapping[str, Any], pods: list[Mapping[str, Any]], not_back: Sequence[NotBack]) -> Decision:
    notes = o.annotations_of(notebook)
    mine = next((n for n in not_back if (n.namespace, n.notebook) == _key(notebook)), None)
    if mine is not None:
        state = f"Terminating, finalizers {list(mine.finalizers)}" if mine.terminating else "not deleted yet"
        return _leave(
            notebook,
            Reason.STOPPING,
            f"stopped by gpu-pool at {_stamp(mine.since)}; its pod {mine.pod} still holds {mine.gpus} "
            f"{GPU_RESOURCE} on {mine.node} ({state})",
            pod=mine.pod,
            node=mine.node,
            gpus=mine.gpus,
        )
    who = "gpu-pool" if _is_ours(notebook) else "its owner or Kubeflow's culler"
    going = [p for p in pods if holds_gpus(p)]
    tail = f"; its pod {o.name(going[0])} is going" if going else "; it holds no GPU"
    return _leave(notebook, Reason.STOPPED, f"stopped by {who} at {notes.get(STOP_ANNOTATION)}{tail}")


def assess(
    notebook: Mapping[str, Any], world: o.Snapshot, evidence: Evidence, policy: Policy, now: datetime,
    not_back: Sequence[NotBack],
) -> Decision | _Candidate:  # fmt: skip
    """The notebook on its own: a final verdict, or a candidate idle over the whole window (contention and the
    limits are the pass's to weigh)."""
    pods = _pods_of(notebook, world.pods)
    if STOP_ANNOTATION in o.annotations_of(notebook):
        return _stopped(notebook, pods, not_back)
    holding = sorted((p for p in pods if holds_gpus(p)), key=is_terminating)
    if not holding:
        waits = any(is_waiting(p) for p in pods)
        return _leave(notebook, Reason.NO_GPU, "its pod waits for a GPU" if waits else "its pod holds no GPU")
    pod = holding[0]
    node_name = o.bound_node(pod) or ""
    gpus = pod_gpus(pod)
    where = {"pod": o.name(pod), "node": node_name, "gpus": gpus}
    if is_terminating(pod):
        return _leave(notebook, Reason.GOING, f"its pod {o.name(pod)} is being deleted", **where)
    excluded = _excluded(notebook, {o.name(n): n for n in world.namespaces}, policy.exclusion_label)
    if excluded:
        return _leave(notebook, Reason.EXCLUDED, excluded, **where)
    since = bound_since(pod)
    held = int((now - since).total_seconds()) if since else 0
    if held < policy.idle_hours * 3600:
        detail = f"its pod has held the card {_hours(held)}, under the {policy.idle_hours} h window"
        return _leave(notebook, Reason.HELD_UNDER_WINDOW, detail, held_seconds=held, **where)
    node = next((n for n in world.nodes if o.name(n) == node_name), None)
    verdict = card_verdict(pod, node, node_name, world, evidence, policy.idle_percent)
    if verdict.reason is not Reason.IDLE:
        return _leave(notebook, verdict.reason, verdict.detail, held_seconds=held, peak_percent=verdict.peak, **where)
    notes = o.annotations_of(notebook)
    warned_at = o.parse_time(notes.get(WARNED_AT))
    # The deadline the warning named; an unreadable one stands for the grace from when the warning was given.
    stop_at = o.parse_time(notes.get(STOP_AFTER)) if warned_at else None
    if warned_at is not None and stop_at is None:
        stop_at = warned_at + timedelta(minutes=policy.grace_minutes)
    return _Candidate(
        notebook=notebook,
        pod=o.name(pod),
        node=node_name,
        gpus=gpus,
        gpu_share=gpus / (slots_per_card(node) or 1),
        held_seconds=held,
        peak=verdict.peak or 0.0,
        warned_at=warned_at,
        stop_at=stop_at,
    )


# ----------------------------------------------------------------------------------------------------- the pass


@dataclass
class _Pass:
    """What the pass has handed out so far: free slots per node as the stops decided so far leave them, the waiting
    pods and full quotas no stop serves yet, and the stops it may still make."""

    free: dict[str, int]
    unserved: list[Waiter]
    quotas: set[str]
    budget: int
    blocked_by: str | None  # a stop whose card has not come back (an earlier pass's, or this pass's)

    def serve(self, candidate: _Candidate) -> str | None:
        """What the candidate's stop would serve, taking it: a waiting pod its slots let fit, else its namespace's
        full quota."""
        room = self.free.get(candidate.node, 0)
        for waiter in self.unserved:
            if room < waiter.gpus <= room + candidate.gpus:
                self.unserved.remove(waiter)
                self.free[candidate.node] = room + candidate.gpus - waiter.gpus
                return f"pod {waiter.namespace}/{waiter.pod} waits for {waiter.gpus} {GPU_RESOURCE}"
        namespace = o.namespace(candidate.notebook)
        if namespace in self.quotas:
            self.quotas.discard(namespace)
            return f"namespace {namespace} is at its GPU quota"
        return None


def _priority(candidate: _Candidate) -> tuple[Any, ...]:
    """Warned notebooks first (their deadline named), soonest first; then the longest held."""
    stop_at = candidate.stop_at.timestamp() if candidate.stop_at else float("inf")
    return (candidate.stop_at is None, stop_at, -candidate.held_seconds, _key(candidate.notebook))


def _as_decision(candidate: _Candidate, action: Action, reason: Reason, detail: str) -> Decision:
    namespace, name = _key(candidate.notebook)
    return Decision(
        namespace,
        name,
        action,
        reason,
        detail,
        pod=candidate.pod,
        node=candidate.node,
        gpus=candidate.gpus,
        gpu_share=candidate.gpu_share,
        held_seconds=candidate.held_seconds,
        peak_percent=candidate.peak,
        stop_at=candidate.stop_at,
    )


def _decide(candidate: _Candidate, served: str, policy: Policy, now: datetime, state: _Pass) -> Decision:
    """A wanted idle notebook: warned first (graceMinutes), stopped once the warning's deadline passed, unless an
    earlier stop's card is not back or the hour's stops are spent (the warning then stands)."""
    idle = (
        f"every card its pod {candidate.pod} holds on {candidate.node} stayed under {policy.idle_percent:g}% "
        f"(peak {candidate.peak:g}%) for {policy.idle_hours} h; held {_hours(candidate.held_seconds)}; {served}"
    )
    if candidate.warned_at is None and policy.grace_minutes > 0:
        warned = replace(candidate, stop_at=now + timedelta(minutes=policy.grace_minutes))
        return _as_decision(warned, Action.WARN, Reason.IDLE, idle)
    if candidate.stop_at is not None and now < candidate.stop_at:
        return _as_decision(candidate, Action.WAIT, Reason.IDLE, idle)
    if state.blocked_by is not None:
        detail = f"idle and wanted, but {state.blocked_by}'s card has not come back yet: one stop at a time"
        return _as_decision(candidate, Action.LEAVE, Reason.CARD_NOT_BACK, detail)
    if state.budget <= 0:
        detail = f"idle and wanted, but {policy.max_per_hour} notebook(s) were stopped in the last hour (maxPerHour)"
        return _as_decision(candidate, Action.LEAVE, Reason.RATE_LIMITED, detail)
    state.budget -= 1
    state.blocked_by = "/".join(_key(candidate.notebook))
    return replace(_as_decision(candidate, Action.STOP, Reason.IDLE, idle), stop_at=None)


def _covered(candidate: _Candidate, wanted: _Contention) -> bool:
    """Whether the contention a stop not back yet serves would be served by this candidate too."""
    room = (wanted.now_free or {}).get(candidate.node, 0) + candidate.gpus
    return any(w.gpus <= room for w in wanted.covered) or (o.namespace(candidate.notebook) in wanted.covered_quotas)


def _unwanted(candidate: _Candidate, wanted: _Contention) -> Decision:
    if not (wanted.waiting or wanted.full_quotas or wanted.covered or wanted.covered_quotas):
        reason, detail = Reason.NOT_CONTENDED, f"idle, but no pod waits for {GPU_RESOURCE} and no GPU quota is full"
    else:
        reason = Reason.NOT_NEEDED
        detail = (
            f"idle, but stopping it would serve no one: the waiting pods need more than {candidate.node} would have "
            "free, or other stops serve them"
        )
    decision = _as_decision(replace(candidate, stop_at=None), Action.LEAVE, reason, detail)
    return replace(decision, withdraw_warning=candidate.warned_at is not None)


def judge(world: o.Snapshot, evidence: Evidence, policy: Policy, now: datetime) -> Judgement:
    """One decision per Notebook of `world`, judged at `now` on `evidence` (see the module's docstring)."""
    not_back = not_back_of(world.notebooks, world.pods, policy, now)
    stops = stops_since(world.notebooks, now - timedelta(hours=1))
    wanted = contention(world, not_back, now)
    assessed = [assess(n, world, evidence, policy, now, not_back) for n in world.notebooks]
    decisions = [a for a in assessed if isinstance(a, Decision)]
    blocked = f"{not_back[0].namespace}/{not_back[0].notebook}" if not_back else None
    state = _Pass(
        dict(wanted.free), list(wanted.waiting), set(wanted.full_quotas), policy.max_per_hour - stops, blocked
    )
    for candidate in sorted((a for a in assessed if isinstance(a, _Candidate)), key=_priority):
        served = state.serve(candidate) if policy.only_when_contended else "onlyWhenContended is off"
        if served:
            decisions.append(_decide(candidate, served, policy, now, state))
        elif blocked and _covered(candidate, wanted):
            # What it would serve waits for the card of the stop not back yet: never a second stop for it meanwhile.
            detail = f"idle, but what it would serve waits for {blocked}'s card, which has not come back yet"
            decisions.append(_as_decision(candidate, Action.LEAVE, Reason.CARD_NOT_BACK, detail))
        else:
            decisions.append(_unwanted(candidate, wanted))
    ambiguous = {d.node: len(evidence.on(d.node)) for d in decisions if d.reason is Reason.AMBIGUOUS_CARD and d.node}
    return Judgement(
        decisions=tuple(sorted(decisions, key=lambda d: (d.namespace, d.notebook))),
        not_back=not_back,
        ambiguous=ambiguous,
        waiting=wanted.waiting,
        full_quotas=wanted.full_quotas,
        stops_last_hour=stops,
    )
