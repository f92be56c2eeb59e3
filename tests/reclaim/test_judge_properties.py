"""The reclaim judgement over many generated pools (hypothesis): whatever the nodes, notebooks, cards, waiting pods,
quotas and earlier stops, the guarantees hold. Nothing is stopped on missing or partial evidence, on a card shared with
a pod that is not a notebook, for an excluded notebook or one held under the window; one stop per pass, none while an
earlier stop's card is not back, never past maxPerHour; no more takers than there is contention; and the same decisions
whatever order the API lists the objects in."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from day2 import objects as o
from day2.claims.compute import holds_gpus
from day2.reclaim.evidence import CardSeries
from day2.reclaim.judge import Action, Judgement, Reason, judge
from tests.day2.k8s_objects import NOW, Obj
from tests.reclaim.world import (
    POLICY,
    card,
    evidence,
    gpu_node,
    gpu_quota,
    namespace,
    notebook,
    notebook_pod,
    stopped_by_policy,
    waiting_pod,
    warned,
    world,
)

NODES = ("rke2-worker-dc1-gpu-a", "rke2-worker-dc2-gpu-a", "rke2-worker-dc3-gpu-a")
NAMESPACES = ("team-a", "team-b")
TAKERS = (Action.STOP, Action.WARN, Action.WAIT)


@dataclass(frozen=True)
class NodeShape:
    cards: int
    replicas: int
    labelled: bool


@dataclass(frozen=True)
class NotebookShape:
    namespace: str
    node: int
    held_hours: int
    excluded: bool
    state: str  # running, warned, due, stopped-gone, stopped-wedged, owner-stopped
    stranger: bool  # a non-notebook GPU pod beside it


@dataclass(frozen=True)
class CardShape:
    present: bool
    peak: float
    full: bool
    names_pod: bool


# Weighted toward the cases that matter: idle notebooks on covered cards, some of them wanted.
MOSTLY = st.sampled_from([True] * 7 + [False])
RARELY = st.sampled_from([False] * 7 + [True])
node_shapes = st.builds(NodeShape, st.integers(1, 2), st.sampled_from([1, 2, 4]), st.booleans())
notebook_shapes = st.builds(
    NotebookShape,
    st.sampled_from(NAMESPACES),
    st.integers(0, len(NODES) - 1),
    st.sampled_from([3] + [30] * 5),
    RARELY,
    st.sampled_from(["running"] * 8 + ["warned", "due", "due", "stopped-gone", "stopped-wedged", "owner-stopped"]),
    RARELY,
)
card_shapes = st.builds(CardShape, MOSTLY, st.sampled_from([0.0, 1.0, 3.0, 5.0, 60.0]), MOSTLY, MOSTLY)


@dataclass(frozen=True)
class Pool:
    objects: list[Obj]
    cards: tuple[CardSeries, ...]
    excluded: frozenset[tuple[str, str]]


def _pool(
    nodes: list[NodeShape], books: list[NotebookShape], cards: list[CardShape], waiters: list[int], full: list[str],
    earlier: int,
) -> Pool:  # fmt: skip
    objects: list[Obj] = [
        gpu_node(NODES[i], cards=s.cards, replicas=s.replicas, labelled=s.labelled) for i, s in enumerate(nodes)
    ]
    objects += [namespace(ns) for ns in NAMESPACES]
    room = {NODES[i]: s.cards * s.replicas for i, s in enumerate(nodes)}
    named: dict[str, list[tuple[str, str]]] = {}
    excluded: set[tuple[str, str]] = set()
    for index, shape in enumerate(books):
        node = NODES[shape.node % len(nodes)]
        name = f"nb-{index}"
        labels = {"gpu-pool.dev/keep-gpu": "true"} if shape.excluded else None
        notes: dict[str, str] | None = {
            "warned": warned(NOW - timedelta(minutes=5), NOW + timedelta(minutes=55)),
            "due": warned(NOW - timedelta(minutes=65), NOW - timedelta(minutes=5)),
            "stopped-gone": stopped_by_policy(NOW - timedelta(minutes=30), f"{name}-0", node),
            "stopped-wedged": stopped_by_policy(NOW - timedelta(minutes=30), f"{name}-0", node),
            "owner-stopped": {"kubeflow-resource-stopped": "2026-05-04T08:00:00Z"},
        }.get(shape.state)
        objects.append(notebook(shape.namespace, name, labels=labels, annotations=notes))
        if shape.excluded:
            excluded.add((shape.namespace, name))
        if shape.state in ("stopped-gone", "owner-stopped") or room[node] < 1:
            continue
        room[node] -= 1
        wedged = shape.state == "stopped-wedged"
        objects.append(
            notebook_pod(
                shape.namespace,
                name,
                node,
                age=timedelta(hours=shape.held_hours),
                deleting=wedged,
                finalizers=["example.com/hold"] if wedged else None,
            )
        )
        named.setdefault(node, []).append((shape.namespace, f"{name}-0"))
        if shape.stranger and room[node] >= 1:
            room[node] -= 1
            job = waiting_pod("batch", f"job-{index}")
            job["spec"]["nodeName"] = node
            job["status"]["phase"] = "Running"
            job["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            objects.append(job)
    objects += [waiting_pod("queue", f"waits-{i}", gpus=gpus) for i, gpus in enumerate(waiters)]
    objects += [gpu_quota(ns, 2, 2) for ns in full]
    objects += [
        notebook("team-old", f"old-{i}", annotations=stopped_by_policy(NOW - timedelta(minutes=20 + i), "x", "y"))
        for i in range(earlier)
    ]
    series: list[CardSeries] = []
    shapes = iter(cards)
    for i, node_shape in enumerate(nodes):
        node = NODES[i]
        for gpu in range(node_shape.cards):
            drawn = next(shapes, CardShape(False, 0.0, True, False))
            if not drawn.present:
                continue
            holders = named.get(node, [])[gpu : gpu + 1] if drawn.names_pod else []
            minutes = None if drawn.full else 600
            series.append(card(node, str(gpu), peak=drawn.peak, minutes=minutes, holders=holders))
    return Pool(objects, tuple(series), frozenset(excluded))


pools = st.builds(
    _pool,
    st.lists(node_shapes, min_size=2, max_size=3),
    st.lists(notebook_shapes, max_size=6),
    st.lists(card_shapes, min_size=6, max_size=6),
    st.lists(st.sampled_from([1, 1, 2]), max_size=3),
    st.lists(st.sampled_from(NAMESPACES), max_size=2, unique=True),
    st.sampled_from([0, 0, 1, 3]),
)
policies = st.builds(
    lambda grace, contended, per_hour: replace(
        POLICY, grace_minutes=grace, only_when_contended=contended, max_per_hour=per_hour
    ),
    st.sampled_from([0, 60]),
    st.booleans(),
    st.integers(1, 3),
)


def judged(pool: Pool, policy: Any) -> Judgement:
    return judge(world(*pool.objects), evidence(*pool.cards), policy, NOW)


def _pod_of(pool: Pool, namespace_name: str, notebook_name: str) -> Obj | None:
    return next(
        (
            p
            for p in pool.objects
            if p["kind"] == "Pod"
            and o.namespace(p) == namespace_name
            and o.labels(p).get("notebook-name") == notebook_name
        ),
        None,
    )


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pools, policies)
def test_every_notebook_gets_one_decision_and_stops_are_one_at_a_time_within_the_hours_limit(
    pool: Pool, policy: Any
) -> None:
    result = judged(pool, policy)

    notebooks = [(o.namespace(n), o.name(n)) for n in pool.objects if n["kind"] == "Notebook"]
    assert sorted((d.namespace, d.notebook) for d in result.decisions) == sorted(notebooks)
    stops = [d for d in result.decisions if d.action is Action.STOP]
    assert len(stops) <= 1
    assert not (stops and result.not_back)
    assert result.stops_last_hour + len(stops) <= max(policy.max_per_hour, result.stops_last_hour)


@SETTINGS
@given(pools, policies)
def test_nothing_is_taken_without_whole_evidence_that_its_cards_were_idle(pool: Pool, policy: Any) -> None:
    result = judged(pool, policy)
    required = evidence().minutes - 28

    for taken in (d for d in result.decisions if d.action in TAKERS):
        assert taken.reason is Reason.IDLE
        assert (taken.namespace, taken.notebook) not in pool.excluded
        assert taken.held_seconds >= policy.idle_hours * 3600
        pod = _pod_of(pool, taken.namespace, taken.notebook)
        assert pod is not None and taken.node is not None
        on_node = [c for c in pool.cards if c.node == taken.node]
        named = [c for c in on_node if (taken.namespace, o.name(pod)) in c.holders]
        assert on_node, "a node without series is never idle"
        for series in named or on_node:
            assert series.peak < policy.idle_percent and series.samples >= required
        sharers = [
            p
            for p in pool.objects
            if p["kind"] == "Pod" and o.bound_node(p) == taken.node and holds_gpus(p) and p is not pod
        ]
        if not named:  # judged as a shared card: only notebooks beside it, and every card of the node idle
            assert all(o.labels(p).get("notebook-name") for p in sharers)
            assert all(c.peak < policy.idle_percent and c.samples >= required for c in on_node)


@SETTINGS
@given(pools, policies)
def test_no_more_notebooks_are_taken_than_there_is_contention(pool: Pool, policy: Any) -> None:
    result = judged(pool, policy)
    taken = [d for d in result.decisions if d.action in TAKERS]

    if policy.only_when_contended:
        assert len(taken) <= len(result.waiting) + len(result.full_quotas)


@SETTINGS
@given(pools, policies, st.randoms(use_true_random=False))
def test_the_order_the_api_lists_objects_in_changes_nothing(pool: Pool, policy: Any, shuffle: random.Random) -> None:
    shuffled = list(pool.objects)
    shuffle.shuffle(shuffled)

    assert judged(replace(pool, objects=shuffled), policy) == judged(pool, policy)
