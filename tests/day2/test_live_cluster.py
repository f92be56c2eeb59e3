"""Live mode: the official client lists the four kinds from an API server and the answer equals the dump's.

The API server is a stand-in on loopback that serves the scenario's objects as the real one serves lists
(`/api/v1/nodes`, `/api/v1/pods`, `/api/v1/configmaps`, `/apis/batch/v1/jobs`); the client deserializes them
into its models and the tool turns them back into plain dicts (ApiClient.sanitize_for_serialization).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.day2.cli_helpers import kubeconfig, run, write_dump
from tests.day2.k8s_objects import NOW_TEXT, dump
from tests.day2.scenarios import broken_driver, notebooks
from tests.loopback import JsonHandler, LoopbackServer

PATHS = {
    "/api/v1/nodes": "Node",
    "/api/v1/pods": "Pod",
    "/api/v1/configmaps": "ConfigMap",
    "/apis/batch/v1/jobs": "Job",
}


class FakeApiServer(LoopbackServer):
    """Serves a dump's objects as list responses; `forbidden` kinds answer 403 like RBAC would."""

    def __init__(self, objects: list[dict[str, Any]], forbidden: frozenset[str] = frozenset()) -> None:
        self.objects, self.forbidden, self.requests = objects, forbidden, list[str]()
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                server.requests.append(path)
                kind = PATHS.get(path)
                if kind is None or kind in server.forbidden:
                    status, body = (
                        (404, {"kind": "Status", "code": 404})
                        if kind is None
                        else (403, {"kind": "Status", "code": 403})
                    )
                else:
                    items = [
                        {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                        for o in server.objects
                        if o["kind"] == kind
                    ]
                    status, body = (
                        200,
                        {
                            "kind": f"{kind}List",
                            "apiVersion": "v1",
                            "metadata": {"resourceVersion": "9"},
                            "items": items,
                        },
                    )
                self.answer(status, body)

        super().__init__(Handler)


@pytest.fixture
def notebooks_server() -> Iterator[FakeApiServer]:
    with FakeApiServer(dump(notebooks())["items"]) as server:
        yield server


def test_live_claims_list_the_four_kinds_and_answer_exactly_like_the_dump(
    notebooks_server: FakeApiServer, tmp_path: Path
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", notebooks_server.url)
    dumped = write_dump(tmp_path / "dump.json", notebooks())

    live = run("claims", "--kubeconfig", str(config), "--context", "lab", "--now", NOW_TEXT, "-o", "json")
    offline = run("claims", "--from", str(dumped), "--now", NOW_TEXT, "-o", "json")

    assert live.code == 0, live.err
    assert live.json() == offline.json()
    assert sorted(set(notebooks_server.requests)) == sorted(PATHS)


def test_live_doctor_finds_the_broken_driver_like_the_dump(tmp_path: Path) -> None:
    with FakeApiServer(dump(broken_driver())["items"]) as server:
        config = kubeconfig(tmp_path / "kubeconfig", server.url)
        live = run("doctor", "--kubeconfig", str(config), "-o", "json")
    offline = run("doctor", "--from", str(write_dump(tmp_path / "dump.json", broken_driver())), "-o", "json")

    assert live.code == offline.code == 1
    assert live.json() == offline.json()


def test_a_list_the_api_server_refuses_is_one_line_naming_the_kind(tmp_path: Path) -> None:
    with FakeApiServer(dump(notebooks())["items"], forbidden=frozenset({"Job"})) as server:
        result = run("claims", "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", server.url)))

    assert result.code == 2 and result.out == "" and result.err.count("\n") == 1
    assert "refused to list Jobs: 403" in result.err
