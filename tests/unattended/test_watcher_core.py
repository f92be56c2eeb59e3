"""The watcher's decisions as data (day2/repair/watcher_core.py): the marks it acts on, the hold that cordons only
what was serving and the end that uncordons only what the hold cordoned, the pods a drain evicts, the Lease, what a
token holds beyond its role, and the node-check Job's name."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.gpu_failure_domain.observed import TURN_HOLDER_ANNOTATION, TURN_STATE_LABEL, WAVE_CORDON_ANNOTATION
from components.shared.health_condition import CONDITION
from components.unattended.objects import LEASE_SECONDS
from day2.repair.watcher_core import (
    beyond,
    done_patch,
    hold_patch,
    job_named,
    lease_free,
    lease_taken,
    marked,
    may_hold,
    to_evict,
)

NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)
HOLDER = "repair:unattended@prod"


def node(*, cordoned: bool = False, state: str = "", holder: str = "", condition: str | None = None) -> dict[str, Any]:
    labels = {TURN_STATE_LABEL: state} if state else {}
    annotations = {TURN_HOLDER_ANNOTATION: holder} if holder else {}
    conditions = [{"type": CONDITION, "status": condition}] if condition else []
    return {
        "metadata": {"name": "n", "resourceVersion": "7", "labels": labels, "annotations": annotations},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, *conditions]},
    }


@pytest.mark.parametrize(("condition", "expected"), [("False", True), ("True", False), (None, False)])
def test_only_a_node_the_health_check_found_broken_is_marked(condition: str | None, expected: bool) -> None:
    assert marked(node(condition=condition)) is expected


def test_the_hold_cordons_a_serving_node_and_the_end_uncordons_it() -> None:
    held = hold_patch(node(), HOLDER, NOW)
    after = {**node(), "metadata": {**node()["metadata"], "annotations": held["metadata"]["annotations"]}}

    assert held["metadata"]["resourceVersion"] == "7"
    assert held["spec"] == {"unschedulable": True}
    assert held["metadata"]["labels"] == {TURN_STATE_LABEL: "repairing"}
    assert done_patch(after, "node:health: Xid 79", NOW)["spec"] == {"unschedulable": None}


def test_a_node_someone_else_cordoned_stays_cordoned_after_the_repair() -> None:
    held = hold_patch(node(cordoned=True), HOLDER, NOW)
    after = {**node(cordoned=True), "metadata": {**node()["metadata"], "annotations": held["metadata"]["annotations"]}}

    assert WAVE_CORDON_ANNOTATION not in held["metadata"]["annotations"]
    assert "spec" not in done_patch(after, "node:health: Xid 79", NOW)


@pytest.mark.parametrize(
    ("state", "holder", "expected"),
    [
        ("", "", True),
        ("done", "up:prod since x", True),
        ("draining", "up:prod since x", False),
        ("stopped", "repair:ana@laptop since x", False),
        ("repairing", f"{HOLDER} since x", True),
    ],
)
def test_the_watcher_takes_a_hold_only_nobody_else_has(state: str, holder: str, expected: bool) -> None:
    assert may_hold(node(state=state, holder=holder), HOLDER) is expected


def test_a_drain_evicts_workloads_not_daemonset_mirror_or_ended_pods() -> None:
    def pod(name: str, owner: str = "ReplicaSet", phase: str = "Running", mirror: bool = False) -> dict[str, Any]:
        annotations = {"kubernetes.io/config.mirror": "x"} if mirror else {}
        meta = {"name": name, "ownerReferences": [{"kind": owner}], "annotations": annotations}
        return {"metadata": meta, "status": {"phase": phase}}

    pods = [pod("web"), pod("driver", "DaemonSet"), pod("static", mirror=True), pod("smoke", "Job", "Succeeded")]

    assert [p["metadata"]["name"] for p in to_evict(pods)] == ["web"]


def test_a_lease_held_by_another_live_watcher_is_not_free_and_one_whose_term_ran_out_is() -> None:
    taken = lease_taken({"spec": {}}, "other", NOW)

    term = datetime.timedelta(seconds=LEASE_SECONDS)
    assert not lease_free(taken, HOLDER, NOW + term - datetime.timedelta(minutes=1))
    assert lease_free(taken, HOLDER, NOW + term + datetime.timedelta(minutes=1))
    assert lease_free(taken, "other", NOW)


ALLOWED = {"/vms/4101": frozenset({"VM.PowerMgmt", "VM.Audit"}), "/mapping/pci/dc1": frozenset({"Mapping.Audit"})}


def test_a_token_that_holds_exactly_its_role_holds_nothing_beyond_it() -> None:
    answer = {path: dict.fromkeys(privileges, 0) for path, privileges in ALLOWED.items()}

    assert beyond(answer, ALLOWED) == []


@given(
    st.dictionaries(
        st.sampled_from(["/", "/vms", "/vms/4101", "/vms/4201", "/mapping/pci/dc1", "/storage"]),
        st.dictionaries(
            st.sampled_from(["VM.PowerMgmt", "VM.Audit", "Mapping.Audit", "Sys.Audit", "VM.Config.HWType"]),
            st.integers(0, 1),
            min_size=1,
        ),
    )
)
def test_any_privilege_outside_the_role_or_any_propagation_is_named(answer: dict[str, dict[str, int]]) -> None:
    problems = beyond(answer, ALLOWED)
    outside = any(set(p) - ALLOWED.get(path, frozenset()) for path, p in answer.items())
    propagates = any(any(p.values()) for p in answer.values())

    assert bool(problems) is (outside or propagates)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63))
def test_a_node_check_jobs_name_fits_63_characters_and_names_the_attempt(host: str) -> None:
    template = {"metadata": {"name": "x", "namespace": "gpu-pool-node-check"}}
    name = job_named(template, host, NOW, "after")["metadata"]["name"]

    assert len(name) <= 63
    assert name.endswith("-20261205030000-after")
