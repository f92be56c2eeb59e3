"""The reclaim judgement (day2/reclaim/judge.py) as pure data, state by state: what it stops, warns, waits on and
leaves alone, and why, with the sentence a person reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from day2.reclaim.evidence import CardSeries
from day2.reclaim.judge import Action, Decision, Judgement, Reason, judge
from tests.day2.k8s_objects import NOW, Obj
from tests.reclaim.world import (
    POLICY,
    SLICED,
    WHOLE,
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

TEAM = "team-a"


def idle_on_whole(
    name: str = "resnet",
    ns: str = TEAM,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> list[Obj]:
    return [notebook(ns, name, labels=labels, annotations=annotations), notebook_pod(ns, name, WHOLE)]


def idle_card(
    pods: list[tuple[str, str]], node: str = WHOLE, *, peak: float = 1.0, minutes: int | None = None
) -> CardSeries:
    return card(node, holders=pods, peak=peak, minutes=minutes)


def decision(judgement: Judgement, name: str = "resnet") -> Decision:
    (found,) = [d for d in judgement.decisions if d.notebook == name]
    return found


def run(*objects: Obj | list[Obj], cards: tuple[CardSeries, ...] = (), **policy: Any) -> Judgement:
    return judge(world(*objects), evidence(*cards), replace(POLICY, **policy), NOW)


WAITER = waiting_pod("katib-sweeps", "trial-7")
RESNET = (TEAM, "resnet-0")


# ------------------------------------------------------------------------------------------- idle and wanted


def test_an_idle_notebook_while_a_gpu_pod_waits_is_warned_first_naming_when_and_why() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([RESNET]),)))

    assert (got.action, got.reason) == (Action.WARN, Reason.IDLE)
    assert got.stop_at == NOW + timedelta(minutes=60)
    assert "pod katib-sweeps/trial-7 waits for 1 nvidia.com/gpu" in got.detail
    assert "stayed under 5%" in got.detail and "held 240.0 h" in got.detail
    assert (got.pod, got.node, got.gpus, got.gpu_share) == ("resnet-0", WHOLE, 1, 1.0)


def test_a_warned_notebook_waits_out_its_grace() -> None:
    notes = warned(NOW - timedelta(minutes=10), NOW + timedelta(minutes=50))
    got = decision(run(gpu_node(WHOLE), idle_on_whole(annotations=notes), WAITER, cards=(idle_card([RESNET]),)))

    assert (got.action, got.reason, got.stop_at) == (Action.WAIT, Reason.IDLE, NOW + timedelta(minutes=50))
    assert not got.withdraw_warning


def test_a_warned_notebook_still_idle_and_wanted_after_its_grace_is_stopped() -> None:
    notes = warned(NOW - timedelta(minutes=61), NOW - timedelta(minutes=1))
    got = decision(run(gpu_node(WHOLE), idle_on_whole(annotations=notes), WAITER, cards=(idle_card([RESNET]),)))

    assert (got.action, got.reason, got.peak_percent) == (Action.STOP, Reason.IDLE, 1.0)


def test_without_a_grace_an_idle_wanted_notebook_is_stopped_at_once() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([RESNET]),), grace_minutes=0))

    assert got.action is Action.STOP


def test_a_warning_whose_deadline_is_unreadable_counts_the_grace_from_when_it_was_given() -> None:
    notes = {**warned(NOW - timedelta(minutes=30), NOW), "notebooks.gpu-pool.dev/reclaim-stop-after": "soon"}
    got = decision(run(gpu_node(WHOLE), idle_on_whole(annotations=notes), WAITER, cards=(idle_card([RESNET]),)))

    assert (got.action, got.stop_at) == (Action.WAIT, NOW + timedelta(minutes=30))


# ------------------------------------------------------------------------------------------- left alone, and why


def test_a_busy_notebook_is_left_alone_and_its_warning_withdrawn() -> None:
    notes = warned(NOW - timedelta(minutes=61), NOW - timedelta(minutes=1))
    got = decision(
        run(gpu_node(WHOLE), idle_on_whole(annotations=notes), WAITER, cards=(idle_card([RESNET], peak=37.0),))
    )

    assert (got.action, got.reason, got.peak_percent) == (Action.LEAVE, Reason.BUSY, 37.0)
    assert got.withdraw_warning and "peaked at 37%" in got.detail


def test_a_peak_at_the_threshold_is_not_idle_as_the_alert_reads_it() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([RESNET], peak=5.0),)))

    assert got.reason is Reason.BUSY


def test_a_notebook_labelled_to_keep_its_card_is_excluded() -> None:
    labels = {"gpu-pool.dev/keep-gpu": "true"}
    got = decision(run(gpu_node(WHOLE), idle_on_whole(labels=labels), WAITER, cards=(idle_card([RESNET]),)))

    assert (got.action, got.reason) == (Action.LEAVE, Reason.EXCLUDED)
    assert "the Notebook is labelled gpu-pool.dev/keep-gpu=true" in got.detail


def test_a_namespace_labelled_to_keep_its_cards_excludes_its_notebooks() -> None:
    labelled = namespace(TEAM, {"gpu-pool.dev/keep-gpu": "true"})
    got = decision(run(gpu_node(WHOLE), labelled, idle_on_whole(), WAITER, cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.EXCLUDED and "its namespace team-a" in got.detail


def test_the_exclusion_label_is_the_configured_one_and_needs_true() -> None:
    other = {"lab.example/reserved": "true"}
    assert (
        decision(
            run(
                gpu_node(WHOLE),
                idle_on_whole(labels=other),
                WAITER,
                cards=(idle_card([RESNET]),),
                exclusion_label="lab.example/reserved",
            )
        ).reason
        is Reason.EXCLUDED
    )
    maybe = {"gpu-pool.dev/keep-gpu": "false"}
    assert decision(run(gpu_node(WHOLE), idle_on_whole(labels=maybe), WAITER, cards=(idle_card([RESNET]),))).reason is (
        Reason.IDLE
    )


def test_a_node_without_card_series_is_unknown_never_idle() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([("x", "y")], node=SLICED),)))

    assert (got.action, got.reason) == (Action.LEAVE, Reason.UNKNOWN_SERIES)
    assert "no card series for rke2-worker-dc3-gpu-a" in got.detail


def test_a_series_that_covers_less_than_the_window_is_unknown() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([RESNET], minutes=20 * 60),)))

    assert got.reason is Reason.UNKNOWN_SERIES
    assert "recorded 1200 of the window's 1440 minutes" in got.detail


def test_a_window_missing_a_few_minutes_is_still_evidence() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([RESNET], minutes=1440 - 28),)))

    assert got.reason is Reason.IDLE


def test_a_whole_card_the_exporter_does_not_name_the_pod_on_is_unknown() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), WAITER, cards=(idle_card([(TEAM, "other-0")]),)))

    assert got.reason is Reason.UNKNOWN_SERIES
    assert "names the pod on 0 of the 1 card(s)" in got.detail


def test_two_whole_cards_are_judged_each_on_its_own_holder() -> None:
    nodes = gpu_node(WHOLE, cards=2)
    objects = [*idle_on_whole(), notebook(TEAM, "bert"), notebook_pod(TEAM, "bert", WHOLE)]
    cards = (card(WHOLE, "0", holders=[RESNET]), card(WHOLE, "1", peak=80.0, holders=[(TEAM, "bert-0")]))
    judged = run(nodes, objects, WAITER, cards=cards)

    assert decision(judged).reason is Reason.IDLE
    assert decision(judged, "bert").reason is Reason.BUSY


def test_a_time_sliced_card_shared_with_a_pod_that_is_not_a_notebook_is_ambiguous() -> None:
    job = waiting_pod("katib-sweeps", "trial-1")
    job["spec"]["nodeName"] = SLICED
    job["status"]["phase"] = "Running"
    objects = [notebook(TEAM, "resnet"), notebook_pod(TEAM, "resnet", SLICED), job]
    judged = run(gpu_node(SLICED, replicas=4), objects, WAITER, cards=(card(SLICED, holders=[RESNET]),))

    got = decision(judged)
    assert (got.action, got.reason) == (Action.LEAVE, Reason.AMBIGUOUS_CARD)
    assert "katib-sweeps/trial-1, not a notebook" in got.detail
    assert judged.ambiguous == {SLICED: 1}


def test_a_time_sliced_card_shared_only_by_idle_notebooks_is_judged() -> None:
    objects = [
        notebook(TEAM, "resnet"),
        notebook_pod(TEAM, "resnet", SLICED),
        notebook(TEAM, "bert"),
        notebook_pod(TEAM, "bert", SLICED, age=timedelta(hours=30)),
    ]
    # The exporter names one of the two pods: the card's utilisation is both of theirs.
    judged = run(gpu_node(SLICED, replicas=2), objects, WAITER, waiting_pod("ml", "t2"), cards=(card(SLICED),))

    assert {d.notebook: d.reason for d in judged.decisions} == {"resnet": Reason.IDLE, "bert": Reason.IDLE}
    assert decision(judged).gpu_share == 0.5


def test_time_sliced_cards_that_disagree_are_ambiguous() -> None:
    objects = [notebook(TEAM, "resnet"), notebook_pod(TEAM, "resnet", SLICED)]
    cards = (card(SLICED, "0"), card(SLICED, "1", peak=90.0))
    got = decision(run(gpu_node(SLICED, cards=2, replicas=4), objects, WAITER, cards=cards))

    assert got.reason is Reason.AMBIGUOUS_CARD and "disagree" in got.detail


def test_a_node_that_does_not_say_how_it_is_sliced_is_judged_as_shared() -> None:
    job = waiting_pod("katib-sweeps", "trial-1")
    job["spec"]["nodeName"] = WHOLE
    job["status"]["phase"] = "Running"
    got = decision(run(gpu_node(WHOLE, labelled=False), idle_on_whole(), job, WAITER, cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.AMBIGUOUS_CARD and "possibly shared" in got.detail


def test_a_pod_held_for_less_than_the_window_is_not_judged_yet() -> None:
    objects = [notebook(TEAM, "resnet"), notebook_pod(TEAM, "resnet", WHOLE, age=timedelta(hours=3))]
    got = decision(run(gpu_node(WHOLE), objects, WAITER, cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.HELD_UNDER_WINDOW and "3.0 h, under the 24 h window" in got.detail


# ------------------------------------------------------------------------------------------- contention


def test_with_no_contention_and_only_when_contended_nothing_is_stopped() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), cards=(idle_card([RESNET]),)))

    assert (got.action, got.reason) == (Action.LEAVE, Reason.NOT_CONTENDED)


def test_without_only_when_contended_an_idle_notebook_is_warned_anyway() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), cards=(idle_card([RESNET]),), only_when_contended=False))

    assert got.action is Action.WARN and "onlyWhenContended is off" in got.detail


def test_a_waiting_pod_that_fits_somewhere_already_is_no_contention() -> None:
    spare = gpu_node("rke2-worker-dc2-gpu-a")
    got = decision(run(gpu_node(WHOLE), spare, idle_on_whole(), WAITER, cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.NOT_CONTENDED


def test_a_pod_waiting_for_more_than_the_stop_frees_is_not_served_by_it() -> None:
    big = waiting_pod("katib-sweeps", "trial-8", gpus=2)
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), big, cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.NOT_NEEDED


def test_one_waiting_pod_is_served_by_one_notebook_the_longest_held() -> None:
    objects = [
        *idle_on_whole(),
        notebook(TEAM, "bert"),
        notebook_pod(TEAM, "bert", "rke2-worker-dc2-gpu-a", age=timedelta(days=2)),
    ]
    cards = (idle_card([RESNET]), card("rke2-worker-dc2-gpu-a", holders=[(TEAM, "bert-0")]))
    judged = run(gpu_node(WHOLE), gpu_node("rke2-worker-dc2-gpu-a"), objects, WAITER, cards=cards)

    assert decision(judged).action is Action.WARN  # held 10 days
    assert decision(judged, "bert").reason is Reason.NOT_NEEDED


def test_a_warned_notebook_keeps_its_turn_over_a_longer_held_one() -> None:
    dc2 = "rke2-worker-dc2-gpu-a"
    notes = warned(NOW - timedelta(minutes=5), NOW + timedelta(minutes=55))
    objects = [
        *idle_on_whole(),
        notebook(TEAM, "bert", annotations=notes),
        notebook_pod(TEAM, "bert", dc2, age=timedelta(days=2)),
    ]
    cards = (idle_card([RESNET]), card(dc2, holders=[(TEAM, "bert-0")]))
    judged = run(gpu_node(WHOLE), gpu_node(dc2), objects, WAITER, cards=cards)

    assert decision(judged, "bert").action is Action.WAIT
    assert decision(judged).reason is Reason.NOT_NEEDED


def test_a_full_gpu_quota_is_contention_for_its_own_namespace_only() -> None:
    objects = [*idle_on_whole(), *idle_on_whole("bert", "team-b")]
    node = gpu_node(WHOLE, cards=2)
    cards = (card(WHOLE, "0", holders=[RESNET]), card(WHOLE, "1", holders=[("team-b", "bert-0")]))
    judged = run(node, objects, gpu_quota(TEAM, 1, 1), cards=cards)

    assert decision(judged).action is Action.WARN and "namespace team-a is at its GPU quota" in decision(judged).detail
    assert decision(judged, "bert").reason is Reason.NOT_NEEDED


def test_a_zero_gpu_quota_is_no_contention() -> None:
    got = decision(run(gpu_node(WHOLE), idle_on_whole(), gpu_quota(TEAM, 0, 0), cards=(idle_card([RESNET]),)))

    assert got.reason is Reason.NOT_CONTENDED


# ------------------------------------------------------------------------------------------- limits


def due() -> dict[str, str]:
    return warned(NOW - timedelta(minutes=90), NOW - timedelta(minutes=30))


def earlier_stops(count: int, ago: timedelta) -> list[Obj]:
    return [
        notebook("team-old", f"old-{i}", annotations=stopped_by_policy(NOW - ago, f"old-{i}-0", WHOLE))
        for i in range(count)
    ]


def test_the_hours_stops_are_limited_and_the_warning_stands() -> None:
    objects = [*idle_on_whole(annotations=due()), *earlier_stops(2, timedelta(minutes=40))]
    judged = run(gpu_node(WHOLE), objects, WAITER, cards=(idle_card([RESNET]),))

    got = decision(judged)
    assert (got.action, got.reason, got.withdraw_warning) == (Action.LEAVE, Reason.RATE_LIMITED, False)
    assert judged.stops_last_hour == 2


def test_stops_older_than_an_hour_no_longer_count() -> None:
    objects = [*idle_on_whole(annotations=due()), *earlier_stops(2, timedelta(minutes=61))]

    assert decision(run(gpu_node(WHOLE), objects, WAITER, cards=(idle_card([RESNET]),))).action is Action.STOP


def test_one_pass_stops_one_notebook_and_the_next_waits_for_its_card() -> None:
    dc2 = "rke2-worker-dc2-gpu-a"
    objects = [
        *idle_on_whole(annotations=due()),
        notebook(TEAM, "bert", annotations=due()),
        notebook_pod(TEAM, "bert", dc2),
    ]
    cards = (idle_card([RESNET]), card(dc2, holders=[(TEAM, "bert-0")]))
    judged = run(gpu_node(WHOLE), gpu_node(dc2), objects, WAITER, waiting_pod("ml", "t2"), cards=cards)

    actions = sorted((d.action, d.reason) for d in judged.decisions)
    assert actions == [(Action.LEAVE, Reason.CARD_NOT_BACK), (Action.STOP, Reason.IDLE)]


def wedged(terminating: bool = True, stopped_ago: timedelta = timedelta(minutes=20)) -> list[Obj]:
    """A notebook the policy stopped whose pod a finalizer holds in Terminating."""
    notes = stopped_by_policy(NOW - stopped_ago, "old-0", WHOLE)
    return [
        notebook(TEAM, "old", annotations=notes),
        notebook_pod(TEAM, "old", WHOLE, deleting=terminating, finalizers=["example.com/hold"]),
    ]


def test_a_stopped_notebooks_pod_held_in_terminating_is_reported_with_its_finalizers() -> None:
    judged = run(gpu_node(WHOLE, cards=2), wedged(), cards=())

    (stuck,) = judged.not_back
    assert (stuck.notebook, stuck.pod, stuck.node, stuck.finalizers) == ("old", "old-0", WHOLE, ("example.com/hold",))
    assert stuck.terminating and stuck.past_deadline
    old = decision(judged, "old")
    assert old.reason is Reason.STOPPING and "Terminating, finalizers ['example.com/hold']" in old.detail


def test_a_stop_within_its_deadline_is_not_back_yet_but_not_past_it() -> None:
    (stuck,) = run(gpu_node(WHOLE), wedged(stopped_ago=timedelta(minutes=5))).not_back

    assert not stuck.past_deadline


def test_while_a_stopped_card_has_not_come_back_no_other_notebook_is_stopped_for_its_waiter() -> None:
    dc2 = "rke2-worker-dc2-gpu-a"
    objects = [*wedged(), notebook(TEAM, "bert", annotations=due()), notebook_pod(TEAM, "bert", dc2)]
    judged = run(gpu_node(WHOLE), gpu_node(dc2), objects, WAITER, cards=(card(dc2, holders=[(TEAM, "bert-0")]),))

    got = decision(judged, "bert")
    assert (got.action, got.reason) == (Action.LEAVE, Reason.CARD_NOT_BACK)
    assert "team-a/old's card" in got.detail and not got.withdraw_warning


def test_with_a_second_waiter_a_stop_is_still_held_back_while_a_card_is_not_back() -> None:
    dc2 = "rke2-worker-dc2-gpu-a"
    objects = [*wedged(), notebook(TEAM, "bert", annotations=due()), notebook_pod(TEAM, "bert", dc2)]
    waiters = [WAITER, waiting_pod("ml", "t2")]
    judged = run(gpu_node(WHOLE), gpu_node(dc2), objects, waiters, cards=(card(dc2, holders=[(TEAM, "bert-0")]),))

    assert decision(judged, "bert").reason is Reason.CARD_NOT_BACK


def test_once_the_pod_is_gone_the_card_is_back_and_the_stop_is_history() -> None:
    notes = stopped_by_policy(NOW - timedelta(minutes=20), "old-0", WHOLE)
    judged = run(gpu_node(WHOLE), notebook(TEAM, "old", annotations=notes))

    assert judged.not_back == ()
    got = decision(judged, "old")
    assert got.reason is Reason.STOPPED and got.detail.startswith("stopped by gpu-pool at")


# ------------------------------------------------------------------------------------------- what it is not about


def test_a_notebook_its_owner_stopped_is_left_alone() -> None:
    notes = {"kubeflow-resource-stopped": "2026-05-04T08:00:00Z"}
    got = decision(run(gpu_node(WHOLE), notebook(TEAM, "resnet", annotations=notes)))

    assert got.reason is Reason.STOPPED and "its owner or Kubeflow's culler" in got.detail


def test_a_restarted_notebook_is_no_longer_the_policys_stop() -> None:
    notes = stopped_by_policy(NOW - timedelta(days=2), "resnet-0", WHOLE)
    notes.pop("kubeflow-resource-stopped")
    judged = run(gpu_node(WHOLE), idle_on_whole(annotations=notes), WAITER, cards=(idle_card([RESNET]),))

    assert judged.not_back == () and decision(judged).reason is Reason.IDLE


def test_a_notebook_without_a_gpu_or_whose_pod_waits_is_not_a_holder() -> None:
    cpu = notebook(TEAM, "cpu-only", gpus=0)
    pending = waiting_pod(TEAM, "queued-0")
    pending["metadata"]["labels"]["notebook-name"] = "queued"
    judged = run(gpu_node(WHOLE), cpu, notebook(TEAM, "queued"), pending)

    assert decision(judged, "cpu-only").reason is Reason.NO_GPU
    assert decision(judged, "queued").detail == "its pod waits for a GPU"


def test_a_notebook_whose_pod_is_being_deleted_is_going() -> None:
    objects = [notebook(TEAM, "resnet"), notebook_pod(TEAM, "resnet", WHOLE, deleting=True)]

    assert decision(run(gpu_node(WHOLE), objects, WAITER, cards=(idle_card([RESNET]),))).reason is Reason.GOING


def test_every_notebook_gets_exactly_one_decision_in_name_order() -> None:
    objects = [*idle_on_whole("b"), *idle_on_whole("a"), notebook("team-z", "c", gpus=0)]
    judged = run(gpu_node(WHOLE, cards=3), objects, cards=())

    assert [(d.namespace, d.notebook) for d in judged.decisions] == [(TEAM, "a"), (TEAM, "b"), ("team-z", "c")]
