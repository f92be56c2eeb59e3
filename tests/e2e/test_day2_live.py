"""`gpu-pool claims` and `gpu-pool doctor` against a real API server give the answers they give from a dump.

Each day-2 scenario is created in a real kube-apiserver of its own (this module's, so other modules' nodes never
mix in): pods bound to the nodes, their status set through the status subresource (Running, CrashLoopBackOff,
stuck in Init, Failed Jobs), a stopped notebook's pod Terminating through a finalizer and a delete. The tool then
reads it live, through the official client and the kubeconfig, and must print exactly what it prints from the
same scenario's dump.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.day2.cli_helpers import ROOT, Result, run, write_dump
from tests.day2.k8s_objects import NOW_TEXT
from tests.day2.scenarios import NODES, SCENARIOS
from tests.e2e import scenario_load
from tests.e2e.conftest import kubectl_for, reported_cluster
from tests.e2e.kube import Kubectl
from tests.e2e.servers import Cluster, Tools


@pytest.fixture(scope="module")
def day2_cluster(e2e_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with reported_cluster(e2e_tools, tmp_path_factory.mktemp("day2-kube")) as running:
        yield running


@pytest.fixture(scope="module")
def day2_kubectl(e2e_tools: Tools, day2_cluster: Cluster) -> Kubectl:
    return kubectl_for(e2e_tools, day2_cluster)


def both(kubeconfig: Path, dump: Path, *argv: str) -> tuple[Result, Result]:
    """The same command, live against the server and from the dump, judged at the scenario's moment."""
    common = ("--stack", "prod", "--stack-dir", str(ROOT), "--now", NOW_TEXT)
    live = run(*argv, *common, "--kubeconfig", str(kubeconfig))
    from_dump = run(*argv, *common, "--from", str(dump))
    return live, from_dump


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(
    request: pytest.FixtureRequest, day2_kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """The scenario, loaded into the server once for every test that reads it (pytest groups them)."""
    objects = SCENARIOS[request.param]()
    scenario_load.load(day2_kubectl, objects)
    return request.param, write_dump(tmp_path_factory.mktemp("dump") / f"{request.param}.json", objects)


@pytest.mark.parametrize("output", ["json", "table"])
def test_claims_read_live_equal_claims_read_from_the_dump(
    scenario: tuple[str, Path], day2_cluster: Cluster, output: str
) -> None:
    _, dump = scenario
    live, from_dump = both(day2_cluster.kubeconfig, dump, "claims", "-o", output)

    assert live.err == from_dump.err == ""
    assert (live.code, live.out) == (from_dump.code, from_dump.out)


def test_doctor_read_live_gives_every_node_the_verdict_it_gets_from_the_dump(
    scenario: tuple[str, Path], day2_cluster: Cluster
) -> None:
    _, dump = scenario
    live, from_dump = both(day2_cluster.kubeconfig, dump, "doctor", "-o", "json")

    assert live.err == from_dump.err
    assert (live.code, live.json()) == (from_dump.code, from_dump.json())
    assert {verdict["node"] for verdict in live.json()} >= set(NODES.values())


@pytest.mark.parametrize("scenario", ["notebooks"], indirect=True)
def test_a_pod_the_server_marked_terminating_still_holds_its_gpu(
    scenario: tuple[str, Path], day2_kubectl: Kubectl, day2_cluster: Cluster
) -> None:
    pod = day2_kubectl.json("get", "pod", "-n", "team-nlp", "llm-scratch-0")
    claims = run("claims", "--kubeconfig", str(day2_cluster.kubeconfig), "--now", NOW_TEXT, "-o", "json").json()

    assert pod["metadata"]["deletionTimestamp"]
    holder = next(h for h in claims["holders"] if h["pod"] == "llm-scratch-0")
    assert (holder["terminating"], holder["gpus"]) == (True, 1)


@pytest.mark.parametrize("scenario", ["broken-driver"], indirect=True)
def test_doctor_live_names_the_oom_killed_driver_as_the_broken_floor(
    scenario: tuple[str, Path], day2_cluster: Cluster
) -> None:
    node = NODES["dc2"]
    result = run("doctor", node, "--kubeconfig", str(day2_cluster.kubeconfig), "--now", NOW_TEXT, "-o", "json")

    assert result.code == 1
    assert result.json()["firstBroken"] == "driver"
