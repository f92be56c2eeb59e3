"""`make diff NODES=` fed the Nodes a real API server serves (`kubectl get nodes -o json`), one of them NotReady
(FIELD-REVIEW-5 WRONG-3): the plan counts it out, puts its turn first, and names the danger instead of "Dangers:
none".

The Nodes go through the API server as a kubelet writes them (registration, then the status subresource), and the
API server's own admission adds what it adds (the `node.kubernetes.io/not-ready` taint of TaintNodesByCondition);
on the bare server no node lifecycle controller runs, so the Ready ones get that taint lifted as the controller
lifts it and the NotReady one keeps it, as it does in a cluster whose kubelet stopped reporting.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.observed import NODES_ENV
from offline.diff import settled_nodes
from offline.runner import read_stack_file
from tests.e2e.engine import PulumiStack
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import KUBELET, LIFECYCLE_CONTROLLER, NOT_READY_TAINT
from tests.ssh_keys import TEST_PUBLIC_KEY

ROOT = Path(__file__).resolve().parents[2]
SICK = "dc2"
# What the node lifecycle controller writes when a kubelet stops renewing its Lease (pkg/controller/nodelifecycle
# node_lifecycle_controller.go, tryUpdateNodeHealth: every condition Unknown, reason NodeStatusUnknown).
UNKNOWN = {
    "type": "Ready",
    "status": "Unknown",
    "reason": "NodeStatusUnknown",
    "message": "Kubelet stopped posting node status.",
}


def stack_file(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return path


def prod() -> dict[str, Any]:
    config = copy.deepcopy(read_stack_file("prod"))
    for domain in config["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    return config


def shared_twice() -> dict[str, Any]:
    """prod with its A1000s shared twice instead of four times: a change every domain's turn rolls."""
    config = prod()
    config["gpu-pool:sharingProfiles"]["a1000-x4"]["replicas"] = 2
    return config


@contextmanager
def serving(kubectl: Kubectl, config: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The stack's three workers as `config`'s `up` leaves them, registered on the API server; dc2's kubelet gone
    quiet."""
    nodes = settled_nodes(config)["items"]
    hosts = {n["metadata"]["labels"]["topology.kubernetes.io/zone"]: n["metadata"]["name"] for n in nodes}
    try:
        for node in nodes:
            name, zone = node["metadata"]["name"], node["metadata"]["labels"]["topology.kubernetes.io/zone"]
            metadata = {k: node["metadata"][k] for k in ("name", "labels", "annotations")}
            kubectl.create(
                {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": node["spec"]}, field_manager=KUBELET
            )
            status = copy.deepcopy(node["status"])
            if zone == SICK:
                status["conditions"] = [UNKNOWN if c["type"] == "Ready" else c for c in status["conditions"]]
            patch = json.dumps({"status": status})
            kubectl(
                "patch", "node", name, "--subresource=status", "--type=merge", "--field-manager", KUBELET, "-p", patch
            )
            if zone != SICK:
                kubectl(
                    "taint", "node", name, f"{NOT_READY_TAINT}:NoSchedule-", "--field-manager", LIFECYCLE_CONTROLLER
                )
        yield hosts
    finally:
        kubectl.run("delete", "node", *hosts.values(), "--ignore-not-found")


@pytest.fixture
def served_nodes(kubectl: Kubectl) -> Iterator[dict[str, str]]:
    with serving(kubectl, prod()) as hosts:
        yield hosts


def test_make_diff_against_the_api_servers_nodes_with_one_not_ready_counts_it_out_and_names_the_danger(
    kubectl: Kubectl, served_nodes: dict[str, str], tmp_path: Path
) -> None:
    before_file, after_file = stack_file(tmp_path / "before", prod()), stack_file(tmp_path / "after", shared_twice())
    saved = tmp_path / "nodes.json"
    saved.write_text(kubectl("get", "nodes", "-o", "json"), encoding="utf-8")
    served = json.loads(saved.read_text())
    (sick,) = [n for n in served["items"] if n["metadata"]["name"] == served_nodes[SICK]]
    assert any(t["key"] == NOT_READY_TAINT for t in sick["spec"]["taints"])
    out = tmp_path / "out"

    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "diff",
            "STACK=prod",
            f"BEFORE={before_file}",
            f"AFTER={after_file}",
            f"NODES={saved}",
            f"OUT={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "Dangers: none" not in done.stdout
    assert f"! {SICK} is not Ready: its turn stops before the drain and the wave stops there" in done.stdout
    document = json.loads((out / "diff.json").read_text())
    assert document["dangers"] >= 1
    assert document["wave"]["batches"][0] == [SICK]
    assert document["wave"]["capacity"][0]["out"] == [SICK]


def test_pulumi_preview_under_the_real_engine_names_the_not_ready_node_as_a_danger_of_its_wave(
    kubectl: Kubectl, prod_engine_stack: PulumiStack, tmp_path: Path
) -> None:
    """The real CLI, language host and program, planning prod against the API server's Nodes (read through
    GPU_POOL_NODES, as `make preview` does offline), which were rolled out to a file that shared the cards twice:
    every domain's turn rolls, and dc2, not Ready, is out and named."""
    with serving(kubectl, shared_twice()):
        saved = tmp_path / "nodes.json"
        saved.write_text(kubectl("get", "nodes", "-o", "json"), encoding="utf-8")
        done = prod_engine_stack.run("preview", "--diff", check=False, env={NODES_ENV: str(saved)})

    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-5000:]
    assert "Traceback" not in said
    assert f"{SICK} is not Ready: its turn stops before the drain and the wave stops there" in said, said[-5000:]
