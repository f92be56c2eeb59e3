"""When the e2e tier nudges the GPU Operator's upgrade controller (tests/e2e/cluster_programs.py `in_flight`): only
while it has a node to move, since each nudge is also a full ClusterPolicy reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.gpu_operator import DRIVER_UPGRADE_STATE_LABEL, NFD_NVIDIA_PCI_LABEL
from tests.e2e.cluster_programs import in_flight


def node(labels: dict[str, str] | None = None, *, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": labels or {}}, "spec": {"unschedulable": True} if cordoned else {}}


def gpu_node(state: str | None, *, cordoned: bool = False) -> dict[str, Any]:
    labels = {NFD_NVIDIA_PCI_LABEL: "true"} | ({DRIVER_UPGRADE_STATE_LABEL: state} if state is not None else {})
    return node(labels, cordoned=cordoned)


def daemonset(generation: int, observed: int, desired: int, updated: int) -> dict[str, Any]:
    status = {"observedGeneration": observed, "desiredNumberScheduled": desired, "updatedNumberScheduled": updated}
    return {"metadata": {"name": "nvidia-driver-daemonset", "generation": generation}, "status": status}


SETTLED = daemonset(2, 2, 3, 3)


def test_a_settled_cluster_is_not_nudged() -> None:
    assert not in_flight([node(), gpu_node("upgrade-done"), gpu_node("upgrade-done")], [SETTLED])


# k8s-operator-libs pkg/upgrade/consts.go (d720f2557494, the operator's go.mod): every state but unknown and done.
STATES_IN_FLIGHT = (
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",
    "post-maintenance-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-failed",
)


@pytest.mark.parametrize("state", STATES_IN_FLIGHT)
def test_a_gpu_node_in_any_upgrade_state_but_done_is_nudged(state: str) -> None:
    assert in_flight([gpu_node("upgrade-done"), gpu_node(state)], [SETTLED])


def test_a_gpu_node_the_controller_has_not_labelled_yet_is_nudged() -> None:
    assert in_flight([gpu_node(None)], [SETTLED])


def test_a_node_without_a_gpu_and_without_a_state_is_not() -> None:
    assert not in_flight([node()], [SETTLED])


def test_a_cordoned_node_is_nudged_even_when_done() -> None:
    assert in_flight([gpu_node("upgrade-done", cordoned=True)], [SETTLED])


def test_a_daemonset_whose_new_template_its_controller_has_not_seen_is_nudged() -> None:
    assert in_flight([gpu_node("upgrade-done")], [daemonset(3, 2, 3, 3)])


def test_a_daemonset_with_pods_on_an_older_template_is_nudged() -> None:
    assert in_flight([gpu_node("upgrade-done")], [daemonset(3, 3, 3, 1)])
