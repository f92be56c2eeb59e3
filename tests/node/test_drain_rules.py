"""Which pods a drain evicts (node/drain.py to_evict), by `kubectl drain --ignore-daemonsets
--delete-emptydir-data`'s filters (k8s.io/kubectl v0.33.5 pkg/drain/filters.go), over every kind of pod."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from node.drain import to_evict


def a_pod(name: str, owner: str | None, phase: str, mirror: bool, controller: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": controller}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    return {"metadata": meta, "status": {"phase": phase}}


def test_workloads_are_evicted_daemonset_and_mirror_pods_left_and_a_bare_pod_refused() -> None:
    pods = [
        a_pod("web", "ReplicaSet", "Running", False),
        a_pod("driver", "DaemonSet", "Running", False),
        a_pod("etcd", "Node", "Running", True),
        a_pod("done", None, "Succeeded", False),
        a_pod("debug", None, "Running", False),
        a_pod("adopted", "ReplicaSet", "Running", False, controller=False),
    ]
    picked = to_evict(pods)
    assert [p["metadata"]["name"] for p in picked.evict] == ["web", "done"]
    assert picked.unmanaged == ("ns/debug", "ns/adopted")


@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "ReplicaSet", "StatefulSet", "Job", "DaemonSet"]),
            st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_every_pod_is_evicted_left_or_refused_exactly_as_kubectl_drain_decides(specs: list[Any]) -> None:
    pods = [a_pod(f"p{i}", owner, phase, mirror) for i, (owner, phase, mirror) in enumerate(specs)]
    picked = to_evict(pods)
    evicted = {p["metadata"]["name"] for p in picked.evict}
    refused = {name.split("/")[1] for name in picked.unmanaged}
    for i, (owner, phase, mirror) in enumerate(specs):
        name, finished = f"p{i}", phase in ("Succeeded", "Failed")
        if finished:
            assert name in evicted
        elif owner == "DaemonSet" or mirror:
            assert name not in evicted and name not in refused
        elif owner is None:
            assert name in refused and name not in evicted
        else:
            assert name in evicted
