"""A Lease one process holds (node/lease.py): a unique identity per process, another holder's term honoured,
renewed while held (FIELD-REVIEW-6 WRONG-5: the holder was the stack, so a second watcher took it at once)."""

from __future__ import annotations

import datetime

from node.kube import Kube
from node.lease import Lease, free_for, identity
from tests.node.memory_api import MemoryApi

PATH = "/apis/coordination.k8s.io/v1/namespaces/gpu-pool-repair/leases/gpu-pool-repair"
NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)


def api() -> MemoryApi:
    return MemoryApi(objects={PATH: {"kind": "Lease", "metadata": {"name": "gpu-pool-repair"}, "spec": {}}})


def lease(memory: MemoryApi, holder: str) -> Lease:
    return Lease(Kube(memory, sleep=lambda _s: None), PATH, holder, seconds=600)


def test_each_process_is_its_own_holder() -> None:
    assert identity() != identity()


def test_a_second_watcher_of_the_same_stack_waits_for_the_lease() -> None:
    memory = api()
    first, second = lease(memory, "pod-a_1"), lease(memory, "pod-b_2")
    assert first.acquire(NOW) == ""
    assert second.acquire(NOW + datetime.timedelta(minutes=5)) == "pod-a_1"
    first.release()
    assert second.acquire(NOW + datetime.timedelta(minutes=6)) == ""


def test_a_holder_whose_term_ran_out_is_gone_and_a_renewed_one_is_not() -> None:
    memory = api()
    first, second = lease(memory, "pod-a_1"), lease(memory, "pod-b_2")
    first.acquire(NOW)
    first.renew(NOW + datetime.timedelta(minutes=8))
    assert second.acquire(NOW + datetime.timedelta(minutes=15)) == "pod-a_1"
    assert second.acquire(NOW + datetime.timedelta(minutes=19)) == ""
    spec = memory.objects[PATH]["spec"]
    assert spec["holderIdentity"] == "pod-b_2" and spec["leaseTransitions"] == 2


def test_renewal_writes_at_most_every_third_of_the_term() -> None:
    memory = api()
    first = lease(memory, "pod-a_1")
    first.acquire(NOW)
    writes = len([r for r in memory.requests if r[0] == "PUT"])
    first.renew(NOW + datetime.timedelta(minutes=1))
    assert len([r for r in memory.requests if r[0] == "PUT"]) == writes


def test_free_honours_renew_time_plus_duration_of_another_holder() -> None:
    held = {"spec": {"holderIdentity": "x", "renewTime": "2026-12-05T03:00:00.000000Z", "leaseDurationSeconds": 60}}
    assert not free_for(held, "y", NOW + datetime.timedelta(seconds=59), 600)
    assert free_for(held, "y", NOW + datetime.timedelta(seconds=61), 600)
    assert free_for(held, "x", NOW, 600)
