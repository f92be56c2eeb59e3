"""Reading the objects: the shapes of list a user may hand over, and what a connection error boils down to."""

from __future__ import annotations

import pytest

from day2.errors import Day2Error
from day2.kube_client import root_cause
from day2.sources import snapshot_from_document


def test_a_kubectl_list_is_split_by_kind_and_other_kinds_are_ignored() -> None:
    snapshot = snapshot_from_document(
        {"kind": "List", "items": [{"kind": "Node"}, {"kind": "Pod"}, {"kind": "Service"}, {"kind": "Job"}]}, "x"
    )

    assert (len(snapshot.nodes), len(snapshot.pods), len(snapshot.configmaps), len(snapshot.jobs)) == (1, 1, 0, 1)


def test_the_items_of_a_typed_list_get_the_lists_kind() -> None:
    """`kubectl get pods -A -o json` alone writes a List too, but the API's PodList items carry no kind."""
    assert len(snapshot_from_document({"kind": "PodList", "items": [{"metadata": {"name": "p"}}]}, "x").pods) == 1


@pytest.mark.parametrize("document", [[], {"kind": "Pod"}, {"items": "none"}, {"items": [1]}])
def test_anything_else_is_refused_naming_the_source(document: object) -> None:
    with pytest.raises(Day2Error, match=r"^--from d\.json: "):
        snapshot_from_document(document, "--from d.json")


def test_a_connection_error_boils_down_to_the_sockets_reason() -> None:
    class Wrapper(Exception):
        def __init__(self, reason: BaseException) -> None:
            super().__init__("Max retries exceeded with url: /api/v1/nodes (Caused by ...)")
            self.reason = reason

    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as refused:
        try:
            raise OSError("Failed to establish a new connection") from refused
        except OSError as inner:
            error = Wrapper(inner)

    assert root_cause(error) == "Connection refused"
    assert root_cause(ValueError("plain\nmessage")) == "plain message"
