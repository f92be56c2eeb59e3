"""Counting GPUs the way the scheduler does, and who holds them: the pure functions of day2/claims/compute.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from day2.claims.compute import (
    ClaimsOptions,
    Holder,
    Owner,
    bound_since,
    compute_claims,
    effective_request,
    free_by_node,
    holds_gpus,
    is_waiting,
    owner_of,
    pod_cpu_request,
    pod_gpus,
    quantity,
    scheduler_reason,
    stop_command,
)
from day2.objects import Snapshot
from tests.day2.k8s_objects import NOW, dump
from tests.day2.scenarios import NODES, healthy_pool, notebooks

OPTIONS = ClaimsOptions(now=NOW)


def snapshot_of(objects: list[dict[str, Any]]) -> Snapshot:
    return Snapshot.from_items(dump(objects)["items"])


def bare_pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    *,
    node: str | None = "n1",
    phase: str = "Running",
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-05-04T09:59:50Z"
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def c(limits: dict[str, str] | None = None, requests: dict[str, str] | None = None, **extra: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"limits": limits or {}, "requests": requests or {}}, **extra}


# --- what one pod asks for ------------------------------------------------------------------------------


def test_a_pod_asks_for_the_sum_of_its_app_containers_gpu_limits() -> None:
    assert pod_gpus(bare_pod([c({"nvidia.com/gpu": "1"}), c({"nvidia.com/gpu": "2"}), c()])) == 3


def test_a_container_without_a_gpu_limit_counts_its_gpu_request() -> None:
    assert pod_gpus(bare_pod([c(requests={"nvidia.com/gpu": "2"})])) == 2


def test_the_limit_wins_over_the_request_when_both_are_set() -> None:
    assert pod_gpus(bare_pod([c({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})])) == 1


def test_a_large_init_container_sets_the_pods_gpus() -> None:
    pod = bare_pod([c({"nvidia.com/gpu": "1"})], init=[c({"nvidia.com/gpu": "2"}), c({"nvidia.com/gpu": "1"})])

    assert pod_gpus(pod) == 2


def test_init_containers_smaller_than_the_app_sum_do_not_add_to_it() -> None:
    pod = bare_pod([c({"nvidia.com/gpu": "1"}), c({"nvidia.com/gpu": "1"})], init=[c({"nvidia.com/gpu": "1"})])

    assert pod_gpus(pod) == 2


def test_a_sidecar_init_container_keeps_running_so_it_adds_to_the_app_containers() -> None:
    sidecar = c({"nvidia.com/gpu": "1"}, restartPolicy="Always")

    assert pod_gpus(bare_pod([c({"nvidia.com/gpu": "1"})], init=[sidecar])) == 2


def test_an_init_container_after_a_sidecar_needs_its_own_request_plus_the_running_sidecar() -> None:
    sidecar = c({"cpu": "1"}, restartPolicy="Always")
    pod = bare_pod([c({"cpu": "1"})], init=[sidecar, c({"cpu": "3"})])

    assert effective_request(pod, lambda container: quantity(container["resources"]["limits"].get("cpu", 0))) == 4


def test_the_cpu_request_is_in_cores_and_a_limit_alone_counts_as_the_request() -> None:
    assert pod_cpu_request(bare_pod([c(requests={"cpu": "600m"}), c({"cpu": "1"})])) == Decimal("1.6")


@pytest.mark.parametrize(("text", "value"), [("600m", "0.6"), ("1.2", "1.2"), ("2", "2"), ("1Ki", "1024"), ("x", "0")])
def test_quantities_read_as_kubernetes_writes_them_and_a_malformed_one_as_zero(text: str, value: str) -> None:
    assert quantity(text) == Decimal(value)


# --- who holds, who waits -------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown"])
def test_a_bound_pod_that_has_not_finished_holds_its_gpus(phase: str) -> None:
    assert holds_gpus(bare_pod([c({"nvidia.com/gpu": "1"})], phase=phase))


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_holds_nothing_even_if_it_is_still_listed(phase: str) -> None:
    assert not holds_gpus(bare_pod([c({"nvidia.com/gpu": "1"})], phase=phase))


def test_a_terminating_pod_still_holds_its_card() -> None:
    assert holds_gpus(bare_pod([c({"nvidia.com/gpu": "1"})], deleting=True))


def test_an_unbound_gpu_pod_waits_and_holds_nothing() -> None:
    pod = bare_pod([c({"nvidia.com/gpu": "1"})], node=None, phase="Pending")

    assert is_waiting(pod) and not holds_gpus(pod)


def test_a_pod_without_gpus_neither_holds_nor_waits() -> None:
    assert not holds_gpus(bare_pod([c({"cpu": "1"})])) and not is_waiting(bare_pod([c()], node=None, phase="Pending"))


def test_the_scheduler_reason_is_the_pod_scheduled_false_message() -> None:
    pod = bare_pod([c()], node=None, phase="Pending")
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes are available"}
    ]

    assert scheduler_reason(pod) == "0/4 nodes are available"
    assert scheduler_reason(bare_pod([c()])) is None


def test_a_pod_is_held_since_it_was_scheduled_else_since_it_started_else_since_it_was_created() -> None:
    pod = bare_pod([c()])
    pod["metadata"]["creationTimestamp"] = "2026-05-01T00:00:00Z"
    assert bound_since(pod) is not None and bound_since(pod).isoformat() == "2026-05-01T00:00:00+00:00"  # type: ignore[union-attr]
    pod["status"]["startTime"] = "2026-05-02T00:00:00Z"
    assert str(bound_since(pod)) == "2026-05-02 00:00:00+00:00"
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-05-01T12:00:00Z"}
    ]
    assert str(bound_since(pod)) == "2026-05-01 12:00:00+00:00"


# --- owners and how to stop them ------------------------------------------------------------------------


def owned(kind: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = bare_pod([c()])
    pod["metadata"]["labels"] = labels or {}
    pod["metadata"]["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
    return pod


def test_a_kubeflow_notebooks_pod_is_owned_by_the_notebook_not_its_statefulset() -> None:
    assert owner_of(owned("StatefulSet", "resnet-lab", {"notebook-name": "resnet-lab"})) == Owner(
        "Notebook", "resnet-lab"
    )


def test_a_replicaset_pod_is_shown_as_its_deployment() -> None:
    pod = owned("ReplicaSet", "triton-7f8d9c6b5d", {"pod-template-hash": "7f8d9c6b5d"})

    assert owner_of(pod) == Owner("Deployment", "triton")


def test_a_job_made_by_a_cronjob_is_shown_as_the_cronjob() -> None:
    job = {
        "kind": "Job",
        "metadata": {
            "name": "nightly-123",
            "namespace": "ns",
            "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}],
        },
    }

    assert owner_of(owned("Job", "nightly-123"), [job]) == Owner("CronJob", "nightly")
    assert owner_of(owned("Job", "once")) == Owner("Job", "once")


def test_a_pod_without_an_owner_is_its_own_owner() -> None:
    assert owner_of(bare_pod([c()])) == Owner("Pod", "p")


def holder_owned_by(kind: str, name: str) -> Holder:
    return Holder("ns", "p-0", "n1", 1, Decimal(1), 10, "Running", False, Owner(kind, name), ())


@pytest.mark.parametrize(
    ("kind", "command"),
    [
        (
            "Notebook",
            'kubectl -n ns annotate notebook nb kubeflow-resource-stopped="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --overwrite',
        ),
        ("Deployment", "kubectl -n ns scale deployment/nb --replicas=0"),
        ("StatefulSet", "kubectl -n ns scale statefulset/nb --replicas=0"),
        ("CronJob", 'kubectl -n ns patch cronjob/nb -p \'{"spec":{"suspend":true}}\''),
        ("Job", "kubectl -n ns delete job/nb"),
        ("Pod", "kubectl -n ns delete pod/p-0"),
    ],
)
def test_the_stop_command_stops_the_owner_so_the_pod_does_not_come_back(kind: str, command: str) -> None:
    assert stop_command(holder_owned_by(kind, "nb")) == command


# --- the whole count ------------------------------------------------------------------------------------


def test_the_articles_notebooks_hold_whole_cards_at_low_cpu_for_months() -> None:
    claims = compute_claims(snapshot_of(notebooks()), OPTIONS)
    by_pod = {h.pod: h for h in claims.holders}

    resnet = by_pod["resnet-lab-0"]
    assert (resnet.gpus, resnet.cpu_request, resnet.owner) == (1, Decimal("0.6"), Owner("Notebook", "resnet-lab"))
    assert resnet.age_seconds == 105 * 86400
    assert resnet.flags == ("low-cpu", "long-held")
    assert by_pod["llm-scratch-0"].cpu_request == Decimal("1.2")


def test_a_stopped_notebooks_terminating_pod_still_holds_its_card_until_it_is_gone() -> None:
    stopping = compute_claims(snapshot_of(notebooks()), OPTIONS)
    gone = compute_claims(snapshot_of(notebooks(stopped_pod_gone=True)), OPTIONS)

    llm = next(h for h in stopping.holders if h.pod == "llm-scratch-0")
    assert llm.terminating and llm.phase == "Running" and llm.flags[0] == "terminating"
    assert free_by_node(stopping)[NODES["dc2"]] == 0
    assert free_by_node(gone)[NODES["dc2"]] == 1
    assert (stopping.total.free, gone.total.free) == (0, 1)


def test_the_trial_that_cannot_be_scheduled_waits_with_the_schedulers_reason() -> None:
    (waiting,) = compute_claims(snapshot_of(notebooks()), OPTIONS).waiting

    assert (waiting.namespace, waiting.gpus) == ("katib-sweeps", 1)
    assert waiting.reason is not None and "3 Insufficient nvidia.com/gpu" in waiting.reason


def test_finished_smoke_pods_and_cpu_pods_hold_nothing_and_only_gpu_nodes_are_listed() -> None:
    claims = compute_claims(snapshot_of(healthy_pool()), OPTIONS)

    assert [h.pod.split("-")[0] for h in claims.holders] == ["triton"]
    assert [n.name for n in claims.nodes] == sorted(NODES.values())
    assert [(n.allocatable, n.allocated, n.free, n.expected) for n in claims.nodes] == [
        (4, 1, 3, None),
        (4, 0, 4, None),
        (1, 0, 1, None),
    ]


def test_expected_slots_come_from_the_stack_and_an_expected_node_that_is_missing_shows_as_zero() -> None:
    expected = {**{n: 4 for n in NODES.values()}, "rke2-worker-dc4-gpu-a": 1}
    claims = compute_claims(snapshot_of(healthy_pool()), ClaimsOptions(now=NOW, expected=expected))

    assert [(n.name[12:15], n.allocatable, n.expected) for n in claims.nodes] == [
        ("dc1", 4, 4),
        ("dc2", 4, 4),
        ("dc3", 1, 4),
        ("dc4", 0, 1),
    ]


def test_a_holder_bound_longer_than_the_threshold_is_long_held_and_not_before() -> None:
    day = 86400
    short = compute_claims(snapshot_of(notebooks()), ClaimsOptions(now=NOW, long_held_seconds=200 * day))
    long = compute_claims(snapshot_of(notebooks()), ClaimsOptions(now=NOW, long_held_seconds=day))

    assert not any("long-held" in h.flags for h in short.holders)
    assert {h.pod for h in long.holders if "long-held" in h.flags} == {
        "resnet-lab-0",
        "llm-scratch-0",
        "lr-sweep-8h6k2nqz-kzxz9",
    }


def test_the_idle_flag_comes_only_from_the_idle_set_given() -> None:
    idle = frozenset({("team-vision", "resnet-lab-0")})
    claims = compute_claims(snapshot_of(notebooks()), ClaimsOptions(now=NOW, idle=idle))

    assert {h.pod for h in claims.holders if "idle" in h.flags} == {"resnet-lab-0"}
