"""The watcher's own decisions as data (day2/repair/watcher_core.py): the marks it acts on, what a token holds beyond
its role, and the node-check Job's name. (Its turn, hold, drain and Lease are node/'s: tests/node/.)"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.gpu_failure_domain.observed import TURN_HOLDER_ANNOTATION, TURN_STATE_LABEL
from components.shared.health_condition import CONDITION
from day2.repair.watcher_core import beyond, job_named, marked

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
