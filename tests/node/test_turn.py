"""A turn's transitions (node/turn.py), the same for the wave, `gpu-pool repair` and the watcher, over the one
client against an API server in memory: the hold, the operator held off, the cordon, the drain, the stop, the end."""

from __future__ import annotations

import json
from typing import Any

import pytest

from node.gate import note_driver_revision
from node.kube import Answer
from node.turn import HeldByOther, cordon, drain, finish_repair, finish_rollout, start, stop, take_hold
from node.vocabulary import (
    DRIVER_REVISION_ANNOTATION,
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION,
    DRIVER_UPGRADE_SKIP_LABEL,
    ROLLOUT_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    WAVE_CORDON_ANNOTATION,
    WAVE_SKIP_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
    TurnState,
)
from node.waiting import StepFailed
from tests.node.cluster import NODE_PATH, a_node, after, annotations_of, cluster, labels_of, pod, turn
from tests.node.memory_api import MemoryApi


def held(state: str, holder: str) -> dict[str, Any]:
    return a_node(
        labels={TURN_STATE_LABEL: state}, annotations={TURN_HOLDER_ANNOTATION: f"{holder} since 2026-12-05T10:00:00Z"}
    )


class Journal:
    """Wraps the API: each write with the node's skip label and cordon at that moment."""

    def __init__(self, api: MemoryApi) -> None:
        self.api, self.calls = api, []  # type: ignore[var-annotated]

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        node = self.api.objects.get(NODE_PATH) or {}
        skip = ((node.get("metadata") or {}).get("labels") or {}).get(DRIVER_UPGRADE_SKIP_LABEL, "")
        self.calls.append((method, path, skip, bool((node.get("spec") or {}).get("unschedulable"))))
        return self.api.request(method, path, body, content_type)


def test_a_turn_takes_the_hold_cordons_drains_and_shows_its_state_on_the_node() -> None:
    api = cluster(None, pod("notebook-0"))
    made, _ = turn(api)
    start(made, "2026-12-05T03:00:00Z", 1)

    assert labels_of(api)[TURN_STATE_LABEL] == "changing"
    assert annotations_of(api)[TURN_HOLDER_ANNOTATION] == "up:prod since 2026-12-05T03:00:00Z"
    assert annotations_of(api)[WAVE_CORDON_ANNOTATION] == "dc1"
    assert annotations_of(api)[WAVE_TURN_ANNOTATION] == "2026-12-05T03:00:00Z"
    assert annotations_of(api)[DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION] == "true"
    assert after(api)["spec"]["unschedulable"] is True
    assert "/api/v1/namespaces/ml/pods/notebook-0" not in api.objects


def test_a_repair_turn_stays_repairing_through_its_drain() -> None:
    api = cluster()
    made, _ = turn(api, holder="repair:ana@laptop")
    start(made, "t", 1)
    assert labels_of(api)[TURN_STATE_LABEL] == "repairing"


def test_a_node_someone_else_cordoned_stays_theirs_and_still_records_the_turns_start() -> None:
    api = cluster(a_node(unschedulable=True))
    made, _ = turn(api)
    cordon(made, "t1")
    assert WAVE_CORDON_ANNOTATION not in annotations_of(api)
    assert annotations_of(api)[WAVE_TURN_ANNOTATION] == "t1"
    assert annotations_of(api)[DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION] == "true"


@pytest.mark.parametrize("ready", ["False", "Unknown", ""], ids=["Ready False", "Ready Unknown", "no Ready condition"])
def test_a_turn_on_a_node_that_is_not_ready_stops_before_its_drain_and_the_node_says_how_to_bring_it_back(
    ready: str,
) -> None:
    """FIELD-REVIEW-5 WRONG-3: the drain used to run against an unreachable kubelet and wait out its 15 minutes."""
    api = cluster(a_node(ready=ready), pod("notebook-0"))
    made, _ = turn(api)
    with pytest.raises(StepFailed, match="n1 is not Ready"):
        start(made, "t", 1)

    assert labels_of(api)[TURN_STATE_LABEL] == "stopped"
    note = annotations_of(api)[WAVE_STOPPED_ANNOTATION]
    assert note.startswith(f"not Ready (Ready={ready or 'none'}): the turn stopped before its drain")
    assert "gpu-pool repair n1 --stack STACK" in note and "wait for it to be Ready" in note
    assert not after(api)["spec"].get("unschedulable")
    assert "/api/v1/namespaces/ml/pods/notebook-0" in api.objects


def test_the_operator_is_held_off_the_node_from_before_the_cordon_until_the_drain_is_done() -> None:
    """FIELD-REVIEW-5 WRONG-1 / FIELD-REVIEW-6 WRONG-3: with no slots of its own the operator's upgrade controller
    starts on every cordoned node, and its own pod deletion races the drain; the watcher's hold lacked it."""
    api = cluster(None, pod("notebook-0"))
    journal = Journal(api)
    made, _ = turn(api)
    made.kube.transport = journal
    start(made, "t", 1)

    evictions = [call for call in journal.calls if call[1].endswith("/eviction")]
    assert evictions and all(skip == "true" and cordoned for _, _, skip, cordoned in evictions)
    # No moment where the node is cordoned and the operator not held off, until the drain is done.
    writes = [call for call in journal.calls if call[0] != "GET"]
    assert all(skip == "true" for _, _, skip, cordoned in writes[:-1] if cordoned)
    assert DRIVER_UPGRADE_SKIP_LABEL not in labels_of(api)
    assert WAVE_SKIP_ANNOTATION not in annotations_of(api)
    assert after(api)["spec"]["unschedulable"] is True


def test_a_skip_label_an_admin_set_is_kept_after_the_drain() -> None:
    api = cluster(a_node(labels={DRIVER_UPGRADE_SKIP_LABEL: "true"}))
    made, _ = turn(api)
    start(made, "t", 1)
    assert labels_of(api)[DRIVER_UPGRADE_SKIP_LABEL] == "true"
    assert WAVE_SKIP_ANNOTATION not in annotations_of(api)


def test_a_drain_refused_for_a_bare_pod_keeps_the_operator_held_off_names_the_pod_and_a_resumed_drain_releases_it():
    api = cluster(None, pod("bare-gpu", owner=None, namespace="team-a"), pod("notebook-0"))
    made, _ = turn(api)
    with pytest.raises(StepFailed, match="cannot delete Pods that declare no controller: team-a/bare-gpu"):
        start(made, "t", 1)

    assert labels_of(api)[DRIVER_UPGRADE_SKIP_LABEL] == "true"
    assert annotations_of(api)[WAVE_SKIP_ANNOTATION] == "dc1"
    assert labels_of(api)[TURN_STATE_LABEL] == "stopped"
    assert annotations_of(api)[WAVE_STOPPED_ANNOTATION].startswith(
        "the drain failed (it waits up to 1m for evictions): cannot delete Pods that declare no controller: "
        "team-a/bare-gpu"
    )
    # Nothing was evicted: kubectl drain refuses before it evicts anything.
    assert "/api/v1/namespaces/ml/pods/notebook-0" in api.objects

    # The person moves the bare pod; the resumed turn (same holder) takes its stopped hold and finishes the drain.
    api.objects.pop("/api/v1/namespaces/team-a/pods/bare-gpu")
    start(made, "t2", 1)
    assert DRIVER_UPGRADE_SKIP_LABEL not in labels_of(api)
    assert WAVE_SKIP_ANNOTATION not in annotations_of(api)
    assert "/api/v1/namespaces/ml/pods/notebook-0" not in api.objects


def test_a_drain_that_waits_on_a_budget_says_so_while_it_waits_and_finishes_when_allowed() -> None:
    api = cluster(None, pod("trainer-1", namespace="team-a"))
    api.pdb_refusals["trainer-1"] = 3
    made, out = turn(api)
    drain(made, 1)
    said = out.getvalue()
    assert "still waiting for the drain of n1" in said and "1 pods left (team-a/trainer-1)" in said
    assert "/api/v1/namespaces/team-a/pods/trainer-1" not in api.objects
    assert WAVE_STOPPED_ANNOTATION not in annotations_of(api)


@pytest.mark.parametrize(
    ("state", "holder", "me"),
    [
        ("repairing", "repair:alice@laptop", "up:prod"),
        ("stopped", "repair:alice@laptop", "up:prod"),
        ("gating", "up:prod", "repair:bob@desk"),
        ("draining", "up:staging", "up:prod"),
    ],
    ids=[
        "a wave on a node a repair works on",
        "a wave on a node whose repair stopped",
        "a repair on a node a wave gates",
        "another stack's wave",
    ],
)
def test_a_turn_on_a_node_another_holder_has_changes_nothing_and_names_the_holder(
    state: str, holder: str, me: str
) -> None:
    """FIELD-REVIEW-5 H2: `pulumi up` and `gpu-pool repair` shared the turn marks with no exclusion."""
    api = cluster(held(state, holder))
    before = json.loads(json.dumps(after(api)))
    made, _ = turn(api, holder=me)
    with pytest.raises(HeldByOther) as refused:
        start(made, "t", 1)
    assert after(api) == before
    assert f"n1 is held by {holder} (turn-state {state})" in str(refused.value)
    assert "kubectl label node n1 --overwrite gpu-pool.dev/turn-state=done" in str(refused.value)


@pytest.mark.parametrize(
    ("state", "holder", "me"),
    [("stopped", "up:prod", "repair:bob@desk"), ("stopped", "up:prod", "up:prod"), ("done", "repair:a@b", "up:prod")],
    ids=["a repair takes a stopped wave's node", "the same stack resumes its stopped turn", "a finished repair's"],
)
def test_a_hold_no_one_works_on_is_taken(state: str, holder: str, me: str) -> None:
    api = cluster(held(state, holder))
    made, _ = turn(api, holder=me)
    take_hold(made, TurnState.DRAINING)
    assert annotations_of(api)[TURN_HOLDER_ANNOTATION].startswith(f"{me} since ")


def test_the_watcher_takes_no_stopped_hold_not_even_a_waves() -> None:
    api = cluster(held("stopped", "up:prod"))
    made, _ = turn(api, holder="repair:unattended@prod")
    with pytest.raises(HeldByOther):
        take_hold(made, TurnState.REPAIRING, take_stopped=False)


def test_a_holder_that_takes_the_node_between_the_read_and_the_patch_makes_the_turn_refuse() -> None:
    api = cluster()

    class Race:
        def __init__(self) -> None:
            self.raced = False

        def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
            if method == "PATCH" and not self.raced:
                self.raced = True
                # Another holder's conditional update lands first: ours carries the resourceVersion it read.
                api.put(NODE_PATH, held("repairing", "repair:alice@laptop"))
            return api.request(method, path, body, content_type)

    made, _ = turn(api)
    made.kube.transport = Race()
    with pytest.raises(HeldByOther, match="repair:alice@laptop"):
        take_hold(made, TurnState.DRAINING)
    assert annotations_of(api)[TURN_HOLDER_ANNOTATION].startswith("repair:alice@laptop")


def test_a_stop_keeps_the_node_cordoned_where_the_turn_cordoned_it_even_if_someone_uncordoned_it() -> None:
    """FIELD-REVIEW-6 WRONG-3: the operator uncordoned a node mid-repair, and the watcher's stop left it so."""
    api = cluster(a_node(annotations={WAVE_CORDON_ANNOTATION: "dc1", WAVE_TURN_ANNOTATION: "t"}))
    made, _ = turn(api, holder="repair:unattended@prod")
    stop(made, "the power cycle did not fix it", {"event": "stopped", "reason": "x"})
    assert after(api)["spec"]["unschedulable"] is True
    assert labels_of(api)[TURN_STATE_LABEL] == "stopped"
    assert json.loads(annotations_of(api)["gpu-pool.dev/repairs"])[-1]["event"] == "stopped"


def test_the_last_step_records_ends_the_turn_and_uncordons_only_a_node_the_turn_cordoned_in_one_patch() -> None:
    ours = a_node(
        unschedulable=True,
        labels={TURN_STATE_LABEL: "gating"},
        annotations={
            WAVE_CORDON_ANNOTATION: "dc1",
            WAVE_TURN_ANNOTATION: "t",
            WAVE_STOPPED_ANNOTATION: "earlier",
            DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true",
        },
    )
    api = cluster(ours)
    made, _ = turn(api)
    writes_before = len([r for r in api.requests if r[0] != "GET"])
    assert finish_rollout(made, {"rke2": "v1"}) == "n1: rolled out, serving"
    assert len([r for r in api.requests if r[0] != "GET"]) == writes_before + 1
    assert not after(api)["spec"].get("unschedulable")
    assert labels_of(api)[TURN_STATE_LABEL] == "done"
    assert annotations_of(api) == {ROLLOUT_ANNOTATION: '{"rke2":"v1"}'}

    theirs = cluster(a_node(unschedulable=True, annotations={WAVE_TURN_ANNOTATION: "t"}))
    made, _ = turn(theirs)
    assert "cordoned by someone else before the wave, left cordoned" in finish_rollout(made, {"rke2": "v1"})
    assert theirs.node("n1")["spec"]["unschedulable"] is True


def test_a_repairs_end_clears_the_operators_mark_and_records_the_repair() -> None:
    ours = a_node(
        unschedulable=True, annotations={WAVE_CORDON_ANNOTATION: "dc1", DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true"}
    )
    api = cluster(ours)
    made, _ = turn(api, holder="repair:ana@laptop")
    finish_repair(made, {"event": "repaired", "reason": "node:pci: gone"})
    assert DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION not in annotations_of(api)
    assert json.loads(annotations_of(api)["gpu-pool.dev/repairs"])[-1]["event"] == "repaired"


def driver_pod_on(revision: str) -> dict[str, dict[str, Any]]:
    path = f"/api/v1/namespaces/gpu-operator/pods/nvidia-driver-daemonset-{revision}"
    body = {
        "kind": "Pod",
        "metadata": {
            "name": f"nvidia-driver-daemonset-{revision}",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-driver-daemonset", "controller-revision-hash": revision},
            "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}],
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    return {path: body}


def test_a_turn_notes_its_driver_pods_revision_before_its_cordon_and_its_end_clears_it() -> None:
    api = cluster(None, driver_pod_on("5d8f7c9b44"))
    journal = Journal(api)
    made, _ = turn(api)
    made.kube.transport = journal
    start(made, "2026-12-05T03:00:00Z", 1, before_cordon=lambda held: note_driver_revision(held, "gpu-operator"))
    assert annotations_of(api)[DRIVER_REVISION_ANNOTATION] == "5d8f7c9b44"
    # Noted with the operator held off (skip label on) and before the cordon, so the operator had not touched the pod:
    # the write before the first one that finds the node cordoned is the cordon's, and the note came before it.
    writes = [call for call in journal.calls if call[0] != "GET" and call[1] == NODE_PATH]
    first_cordoned = next(i for i, call in enumerate(writes) if call[3])
    assert first_cordoned >= 3 and all(call[2] == "true" for call in writes[first_cordoned - 2 : first_cordoned])

    # A resumed turn's start keeps what its first start noted (the pod it finds may already be the new one).
    api.objects.update(driver_pod_on("6b7c8d9e55"))
    del api.objects["/api/v1/namespaces/gpu-operator/pods/nvidia-driver-daemonset-5d8f7c9b44"]
    start(made, "2026-12-05T03:00:00Z", 1, before_cordon=lambda held: note_driver_revision(held, "gpu-operator"))
    assert annotations_of(api)[DRIVER_REVISION_ANNOTATION] == "5d8f7c9b44"

    finish_rollout(made, {"driver-template": "abc"})
    assert DRIVER_REVISION_ANNOTATION not in annotations_of(api)
