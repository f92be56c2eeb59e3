"""`gpu-pool repair --reset-breaker --stack S`: a person closes the breaker in the stack's cluster, recorded with who
and when, by a conditional update; against an API server stand-in on loopback that serves the ConfigMap and answers
409 to a stale resourceVersion as the real one does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.unattended.objects import BREAKER_CONFIGMAP
from day2.repair.unattended import Breaker, Failure, breaker_data, breaker_of
from tests.day2.cli_helpers import ROOT, kubeconfig, run
from tests.loopback import JsonHandler, LoopbackServer

PATH = f"/api/v1/namespaces/gpu-pool-repair/configmaps/{BREAKER_CONFIGMAP}"
OPEN = Breaker(open=True, failures=(Failure("2026-12-05T01:00:00Z", "a", "x"),), opened_at="2026-12-05T02:00:00Z")


class ConfigMapServer(LoopbackServer):
    def __init__(self, data: dict[str, str], *, conflict: bool = False) -> None:
        self.object: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": BREAKER_CONFIGMAP, "namespace": "gpu-pool-repair", "resourceVersion": "7"},
            "data": data,
        }
        self.conflict, self.puts = conflict, list[dict[str, Any]]()
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != PATH:
                    self.answer(404, {"kind": "Status", "code": 404})
                    return
                self.answer(200, server.object)

            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.puts.append(body)
                stale = body["metadata"].get("resourceVersion") != server.object["metadata"]["resourceVersion"]
                if server.conflict or stale:
                    self.answer(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                    return
                server.object = {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}
                self.answer(200, server.object)

        super().__init__(Handler)


def stack_dir(tmp_path: Path, enabled: bool = True) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    document["config"]["gpu-pool:repair"] = {"healthCheck": {"enabled": True}, "unattended": {"enabled": enabled}}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return tmp_path


@pytest.fixture
def open_breaker() -> Iterator[ConfigMapServer]:
    with ConfigMapServer(breaker_data(OPEN)) as server:
        yield server


def reset(tmp_path: Path, server: ConfigMapServer, *extra: str) -> Any:
    config = kubeconfig(tmp_path / "kubeconfig", server.url)
    return run(
        "repair", "--reset-breaker", "--stack", "prod", "--stack-dir", str(stack_dir(tmp_path)),
        "--kubeconfig", str(config), "--now", "2026-12-05T09:00:00Z", *extra,
    )  # fmt: skip


def test_reset_breaker_closes_it_and_records_who_and_when_with_a_conditional_update(
    tmp_path: Path, open_breaker: ConfigMapServer
) -> None:
    result = reset(tmp_path, open_breaker)

    assert result.code == 0, result.err
    assert open_breaker.puts[0]["metadata"]["resourceVersion"] == "7"
    closed = breaker_of(open_breaker.object["data"])
    assert not closed.open and closed.failures == () and closed.reset_at == "2026-12-05T09:00:00Z"
    assert "@" in closed.reset_by and f"closed by {closed.reset_by}" in result.out
    assert "was open since 2026-12-05T02:00:00Z" in result.out


def test_a_breaker_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    with ConfigMapServer(breaker_data(OPEN), conflict=True) as server:
        result = reset(tmp_path, server)

    assert result.code == 2 and "HTTP 409" in result.err and "run it again" in result.err
    assert "Traceback" not in result.err


def test_reset_breaker_takes_no_node_and_a_stack_without_the_watcher_has_no_breaker(
    tmp_path: Path, open_breaker: ConfigMapServer
) -> None:
    with_node = reset(tmp_path, open_breaker, "rke2-worker-dc1-gpu-a")
    assert with_node.code == 2 and "no NODE" in with_node.err

    config = kubeconfig(tmp_path / "kubeconfig", open_breaker.url)
    off = run(
        "repair", "--reset-breaker", "--stack", "prod", "--stack-dir", str(stack_dir(tmp_path / "off", False)),
        "--kubeconfig", str(config),
    )  # fmt: skip
    assert off.code == 2 and "repair.unattended.enabled" in off.err and open_breaker.puts == []


def test_repair_without_a_node_says_what_it_needs() -> None:
    result = run("repair", "--stack", "prod")

    assert result.code == 2 and "NODE" in result.err
