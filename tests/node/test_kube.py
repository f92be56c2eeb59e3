"""The one Kubernetes client (node/kube.py): client-go's manners over either transport, and the kubectl transport's
requests as kubectl runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.kube import ApiError, Conflict, Kube, Kubectl, kubectl_resource
from node.waiting import StepFailed, Waiter
from tests.node.cluster import NODE_PATH, a_node, cluster
from tests.node.memory_api import Fault


def client(api: object) -> tuple[Kube, list[float]]:
    pauses: list[float] = []
    return Kube(api, sleep=pauses.append), pauses  # type: ignore[arg-type]


def test_a_429_is_sent_again_after_its_retry_after_for_any_verb() -> None:
    api = cluster()
    api.faults.append(Fault("PATCH", NODE_PATH, 429, times=2, retry_after=3))
    kube, pauses = client(api)
    kube.patch(NODE_PATH, {"metadata": {"labels": {"a": "b"}}})
    assert pauses == [3, 3]
    assert api.node("n1")["metadata"]["labels"] == {"a": "b"}


def test_a_read_the_server_did_not_answer_is_sent_again_and_an_api_server_restart_is_ridden_out() -> None:
    api = cluster()
    api.faults.append(Fault("GET", NODE_PATH, None, times=5, sent=True))
    kube, pauses = client(api)
    assert kube.node("n1") is not None
    assert pauses == [1.0] * 5


def test_a_write_that_may_have_reached_the_server_is_not_sent_twice() -> None:
    api = cluster()
    api.faults.append(Fault("POST", "/api/v1/namespaces/default/events", None, times=1, sent=True))
    kube, _ = client(api)
    with pytest.raises(ApiError, match="no answer from the API server") as failed:
        kube.create("/api/v1/namespaces/default/events", {"metadata": {"generateName": "x-"}})
    assert failed.value.status is None
    assert api.events == []


def test_a_write_refused_before_it_reached_the_server_is_sent_again() -> None:
    api = cluster()
    api.faults.append(Fault("POST", "/api/v1/namespaces/default/events", None, times=2, sent=False))
    kube, _ = client(api)
    kube.create("/api/v1/namespaces/default/events", {"metadata": {"generateName": "x-"}})
    assert len(api.events) == 1


def test_retries_end_after_ten_and_say_the_status() -> None:
    api = cluster()
    api.faults.append(Fault("GET", NODE_PATH, 503, times=50))
    kube, pauses = client(api)
    with pytest.raises(ApiError, match=": 503 ") as failed:
        kube.node("n1")
    assert failed.value.status == 503 and len(pauses) == 10


def test_a_conditional_patch_is_made_again_on_409_with_the_node_read_again() -> None:
    api = cluster()
    calls = {"n": 0}

    def change(node: dict[str, object]) -> dict[str, object]:
        calls["n"] += 1
        if calls["n"] == 1:
            api.put(NODE_PATH, a_node(labels={"kubelet": "moved"}))  # the kubelet's status write in between
        return {"metadata": {"labels": {"mine": "yes"}}}

    kube, _ = client(api)
    kube.patch_node("n1", change)
    assert calls["n"] == 2
    assert api.node("n1")["metadata"]["labels"] == {"kubelet": "moved", "mine": "yes"}


def test_a_409_of_a_plain_update_is_a_conflict_for_the_caller() -> None:
    api = cluster()
    kube, _ = client(api)
    stale = api.node("n1") | {"metadata": {"name": "n1", "resourceVersion": "0"}}
    with pytest.raises(Conflict):
        kube.update(NODE_PATH, stale)


def test_an_api_error_inside_a_wait_is_not_yet_until_the_deadline() -> None:
    answers: list[ApiError | tuple[bool, str, str]] = [
        ApiError("GET x: no answer from the API server"),
        (False, "not yet", ""),
        (True, "there", ""),
    ]

    def check() -> tuple[bool, str, str]:
        answer = answers.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    assert Waiter("x", 1, poll=0).until(check) == "there"
    with pytest.raises(StepFailed, match="last API error: GET x: 503"):
        Waiter("x", 0, poll=0).until(lambda: (_ for _ in ()).throw(ApiError("GET x: 503 Unavailable")))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/nodes/n1", ("nodes", "n1", None, None)),
        ("/api/v1/nodes/n1/status", ("nodes", "n1", None, "status")),
        ("/api/v1/namespaces/ns/configmaps/c", ("configmaps", "c", "ns", None)),
        ("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("leases.v1.coordination.k8s.io", "l", "ns", None)),
    ],
)
def test_kubectl_patches_the_object_the_path_names(path: str, expected: tuple[object, ...]) -> None:
    assert kubectl_resource(path) == expected


def test_kubectls_error_lines_are_read_back_as_the_api_servers_status(tmp_path: Path) -> None:
    import sys

    fake = tmp_path / "kubectl"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "print('Error from server (NotFound): nodes \"n9\" not found', file=sys.stderr)\nsys.exit(1)\n"
    )
    fake.chmod(0o755)
    kube = Kube(Kubectl([str(fake)]), sleep=lambda _s: None)
    assert kube.node("n9") is None
    refused = tmp_path / "refused"
    refused.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "print('The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?')\n"
        "sys.exit(1)\n"
    )
    refused.chmod(0o755)
    with pytest.raises(ApiError, match="was refused"):
        Kube(Kubectl([str(refused)]), sleep=lambda _s: None, max_retries=1).node("n1")
