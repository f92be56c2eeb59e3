"""`make diff NODES=` trusts no file blindly (FIELD-REVIEW-5, issue 36 item 4): each wrong input a new user fed it
once planned every domain as a first install, dropped the RKE2 wave and printed "Dangers: none". Each is now
refused with exit 2 and one message naming what is wrong (no traceback, nothing planned), or, where part of the
file is this cluster's, the plan says which domains it would install anew and never says "Dangers: none"."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from offline.diff import _stack_file, main, settled_nodes
from offline.runner import ROOT_DIR
from tests.day2.k8s_objects import validated
from tests.offline.test_waves import bumped, prod, write_stack

Obj = dict[str, Any]


def pod(name: str) -> Obj:
    return validated(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            "status": {"phase": "Running"},
        }
    )


def run(tmp_path: Path, nodes: Obj | str, before: dict[str, Any] | None = None) -> tuple[int, str, str]:
    """`make diff NODES=` of the RKE2 bump against `nodes`: (exit code, stdout, stderr)."""
    old = write_stack(tmp_path / "before", before if before is not None else prod())
    new = write_stack(tmp_path / "after", bumped())
    saved = tmp_path / "nodes.json"
    saved.write_text(nodes if isinstance(nodes, str) else json.dumps(nodes), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--before", str(old), "--after", str(new), "--nodes", str(saved), "--out", str(tmp_path / "o")])
    return code, out.getvalue(), err.getvalue()


def refused(tmp_path: Path, nodes: Obj | str, before: dict[str, Any] | None = None) -> str:
    code, out, err = run(tmp_path, nodes, before)
    assert code == 2, out
    assert err.startswith("error: ") and "Traceback" not in err and out == ""
    assert not (tmp_path / "o" / "diff.json").exists()
    return err


def test_a_saved_pod_list_is_refused_naming_the_kinds_it_holds(tmp_path: Path) -> None:
    pods = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [pod("a"), pod("b"), pod("c")]}

    error = refused(tmp_path, pods)

    assert "lists 3 Pod, not only Nodes" in error
    assert "kubectl get nodes -o json >" in error


def test_a_file_of_nodes_mixed_with_other_kinds_is_refused_naming_each_kind(tmp_path: Path) -> None:
    nodes = settled_nodes(prod())
    nodes["items"].append(pod("debug"))

    error = refused(tmp_path, nodes)

    assert "lists 3 Node, 1 Pod, not only Nodes" in error


def test_one_object_of_another_kind_is_refused_naming_its_kind(tmp_path: Path) -> None:
    error = refused(tmp_path, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})

    assert "it holds a Deployment" in error


def test_nodes_without_status_are_refused_naming_each_node_and_field(tmp_path: Path) -> None:
    nodes = settled_nodes(prod())
    for item in nodes["items"]:
        del item["status"]

    error = refused(tmp_path, nodes)

    for name in ("rke2-worker-dc1-gpu-a", "rke2-worker-dc2-gpu-a", "rke2-worker-dc3-gpu-a"):
        assert f"Node {name} in {tmp_path / 'nodes.json'} has no status.conditions" in error
        assert f"Node {name} in {tmp_path / 'nodes.json'} has no status.nodeInfo.kubeletVersion" in error


def test_a_node_without_a_kubelet_version_is_refused_naming_it(tmp_path: Path) -> None:
    nodes = settled_nodes(prod())
    del nodes["items"][1]["status"]["nodeInfo"]["kubeletVersion"]

    error = refused(tmp_path, nodes)

    assert "Node rke2-worker-dc2-gpu-a" in error and "no status.nodeInfo.kubeletVersion" in error
    assert "status.conditions" not in error


def test_another_clusters_nodes_are_refused_naming_the_stacks_hostnames(tmp_path: Path) -> None:
    nodes = settled_nodes(prod())
    for index, item in enumerate(nodes["items"]):
        item["metadata"]["name"] = f"other-lab-worker-{index}"

    error = refused(tmp_path, nodes)

    assert "has no Node of this stack (rke2-worker-dc1-gpu-a, rke2-worker-dc2-gpu-a, rke2-worker-dc3-gpu-a)" in error
    assert "other-lab-worker-0" in error


def test_an_earlier_file_of_another_lab_is_refused_as_such(tmp_path: Path) -> None:
    other = prod()
    other["gpu-pool:proxmox"]["endpoint"] = "https://pve.other-lab.example:8006/"
    for index, domain in enumerate(other["gpu-pool:failureDomains"]):
        domain["name"] = f"lab{index}"
        domain["hostname"] = f"other-worker-{index}"

    error = refused(tmp_path, settled_nodes(prod()), before=other)

    assert "BEFORE: the earlier file shares no failure domain (lab0, lab1, lab2 vs dc1, dc2, dc3)" in error
    assert "another lab's stack file" in error


def test_one_node_of_the_stack_plans_the_others_as_first_installs_and_says_so_as_a_danger(tmp_path: Path) -> None:
    one = copy.deepcopy(settled_nodes(prod())["items"][0])

    code, out, _ = run(tmp_path, one)

    assert code == 0
    assert "Dangers: none" not in out
    for domain, host in (("dc2", "rke2-worker-dc2-gpu-a"), ("dc3", "rke2-worker-dc3-gpu-a")):
        assert f"NODES has no Node {host}, so domain {domain} is planned as a first install" in out
    document = json.loads((tmp_path / "o" / "diff.json").read_text())
    assert len(document["nodesDangers"]) == 2 and document["dangers"] >= 2
    # The one Node that is there still gets its turn of the RKE2 wave.
    assert document["wave"]["domains"]["dc1"]["turn"] == "roll"


def test_the_makefiles_hint_without_before_shows_a_form_make_diff_accepts(tmp_path: Path) -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "diff", "BEFORE="], cwd=ROOT_DIR, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    hint = done.stderr.splitlines()[0]
    match = re.search(r"e\.g\.: mkdir -p (\S+) && git show (\S+) > (\S+) && make diff STACK=prod BEFORE=(\S+)$", hint)
    assert match is not None, hint
    folder, _, written, before = match.groups()
    assert written == before and Path(before).parent == Path(folder)
    # The path the hint writes is a name the diff reads as stack prod's file.
    assert _stack_file(Path(before)) == ("prod", Path(folder))


def test_a_driver_change_names_the_cordoned_gpu_nodes_outside_the_stack_the_operator_upgrades_too(
    tmp_path: Path,
) -> None:
    """FIELD-REVIEW-5 H1: with no slots of its own the operator upgrades every cordoned node, not only the wave's."""
    from components.gpu_failure_domain.observed import node_document

    nodes = settled_nodes(prod())
    other = node_document("build-gpu-1", labels={}, annotations={}, kubelet="v1.33.5+rke2r1", kernel="", gpus=2)
    other["spec"]["unschedulable"] = True
    nodes["items"].append(validated(other))
    after = prod()
    after["gpu-pool:gpuOperator"]["driverVersion"] = "580.173.02"
    old, new = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", after)
    saved = tmp_path / "nodes.json"
    saved.write_text(json.dumps(nodes), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--before", str(old), "--after", str(new), "--nodes", str(saved), "--out", str(tmp_path / "o")])

    assert code == 0
    assert (
        "build-gpu-1 is a cordoned GPU node outside this stack: the GPU Operator upgrades its driver too"
        in out.getvalue()
    )


def test_make_diff_shows_a_domain_a_repair_holds_as_a_danger(tmp_path: Path) -> None:
    """FIELD-REVIEW-5 H2 through `make diff NODES=`: a repair's hold is what `pulumi up` would refuse."""
    nodes = settled_nodes(prod())
    dc2 = next(i for i in nodes["items"] if i["metadata"]["name"] == "rke2-worker-dc2-gpu-a")
    dc2["spec"]["unschedulable"] = True
    dc2["metadata"]["labels"]["gpu-pool.dev/turn-state"] = "repairing"
    dc2["metadata"]["annotations"] |= {
        "gpu-pool.dev/turn-holder": "repair:alice@laptop since 2026-12-05T10:00:00Z",
        "gpu-pool.dev/wave-cordoned": "dc2",
        "gpu-pool.dev/wave-turn": "2026-12-05T10:00:00Z",
    }

    code, out, _ = run(tmp_path, nodes)

    assert code == 0
    assert (
        "! dc2 (rke2-worker-dc2-gpu-a) is held by repair:alice@laptop since 2026-12-05T10:00:00Z "
        "(gpu-pool.dev/turn-state repairing)" in out
    )
