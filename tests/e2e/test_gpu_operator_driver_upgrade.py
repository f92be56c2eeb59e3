"""A driver bump under the GPU Operator's own upgrade controller, with the upgrade policy a day-2 wave needs.

FIELD-REVIEW-4 WRONG-3: with the chart's default policy (`maxUnavailable: 25%`) the operator picks a node of its own
and upgrades it while the wave drains another. The program's values for waves (operator_values.py
DRIVER_UPGRADE_POLICY) are `autoUpgrade: true` and zero `maxUnavailable`: `GetUpgradesAvailable` then gives no slot,
and only a node that is already cordoned proceeds (vendored k8s-operator-libs pkg/upgrade/upgrade_inplace.go,
"progess with manually cordoned nodes").

Run here by the operator's controller itself (v26.7.0, built from source) on a control plane of this module's own,
over three GPU Nodes as prod's domains register (KWOK runs the operand pods, kube-controller-manager's DaemonSet
controller replaces the driver pod the operator deletes): the chart rendered with the release values the program
passes, then the ClusterPolicy's driver bumped twice while the test cordons nodes as a wave
does. A watcher samples every node throughout; the tests read what it saw.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.operator_values import DRIVER_UPGRADE_POLICY
from knowledge.gpu_operator import DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION
from tests.e2e.chart import CHART_VERSION, RELEASE_RESOURCE, helm, package_chart
from tests.e2e.cluster_programs import apply_objects, running_gpu_operator
from tests.e2e.conftest import install_crds, reported_control_plane
from tests.e2e.control_plane import ControlPlane, node_ready, register_node
from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.nodes import kubelet_report, nfd_labels, rke2_registration
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed
from tests.e2e.upgrade_watch import DONE, REQUIRED, Sample, Watch, out_of_service

UPGRADE_CRDS = (
    f"gpu-operator/{CHART_VERSION}/chart/crds/nvidia.com_clusterpolicies.yaml",
    f"gpu-operator/{CHART_VERSION}/chart/crds/nvidia.com_nvidiadrivers.yaml",
    f"gpu-operator/{CHART_VERSION}/chart/crds/nvidia.com_gpuclusters.yaml",
    f"gpu-operator/{CHART_VERSION}/chart/charts/node-feature-discovery/crds/nfd-api-crds.yaml",
)
BUMPS = ("595.91.08", "595.91.09")


def release_values(stack: Previewed) -> dict[str, Any]:
    """The values the stack's Release carries, the driver's upgrade policy for a wave among them
    (components/gpu_platform/operator_values.py DRIVER_UPGRADE_POLICY)."""
    values: dict[str, Any] = copy.deepcopy(stack.resource(RELEASE_RESOURCE)["inputs"]["values"])
    return values


def render(tools: Tools, archive: Path, work: Path, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "values.yaml").write_text(yaml.safe_dump(values))
    template = (
        "template",
        "gpu-operator",
        str(archive),
        "--namespace",
        namespace,
        "--values",
        str(work / "values.yaml"),
    )
    # An install, not an upgrade: the chart's pre-upgrade and pre-delete hooks are Helm's own, not the operator's.
    return load_documents(helm(tools, work, *template, "--no-hooks", "--kube-version", "v1.33.5"))


def cluster_policy(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "ClusterPolicy"]
    return found


@dataclass(frozen=True)
class Scenario:
    watch: Watch
    # What each step found when it ended, by step name.
    seen: dict[str, dict[str, Sample]]
    operator_log: Path
    policy_rendered: dict[str, Any]
    policy_stored: dict[str, Any]
    pinned: str
    # The first sample after the install settled: the bumps start there.
    settled: int


def cordon(kubectl: Kubectl, host: str, *, as_initial_state: bool = False) -> None:
    kubectl("cordon", host)
    if as_initial_state:
        kubectl("annotate", "node", host, f"{DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION}=true")


def bump(kubectl: Kubectl, version: str) -> None:
    """The driver version in the ClusterPolicy, as a chart upgrade with a new `driver.version` changes it."""
    patch = json.dumps({"spec": {"driver": {"version": version}}})
    kubectl(
        "patch", "clusterpolicies.nvidia.com", "cluster-policy", "--type=merge", "--field-manager", "helm", "-p", patch
    )


@pytest.fixture(scope="module")
def scenario(
    e2e_tools: Tools, upstream: Path, prod_stack: Previewed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    work = tmp_path_factory.mktemp("driver-upgrade")
    archive = package_chart(e2e_tools, upstream, work)
    cfg = prod_stack.config
    namespace = cfg.gpu_operator.namespace
    hosts = {d.name: d.hostname for d in cfg.failure_domains}
    with reported_control_plane(e2e_tools, work / "cluster") as plane:
        kubectl = plane.kubectl
        install_crds(kubectl, upstream, UPGRADE_CRDS)
        # What `pulumi up` creates around the release: the namespace and the ConfigMaps the values name.
        kubectl.create_namespaces([m for m in prod_stack.manifests() if m.name.startswith("namespace-")])
        for manifest in prod_stack.manifests():
            docs = load_documents(manifest.read_text())
            if all(d["kind"] == "ConfigMap" and d["metadata"].get("namespace") == namespace for d in docs):
                kubectl.server_side_apply(manifest, dry_run=False)
        objects = render(e2e_tools, archive, work / "render", namespace, release_values(prod_stack))
        apply_objects(kubectl, objects, field_manager="helm")
        for domain in cfg.failure_domains:
            labels, taints = rke2_registration(domain, cfg.rke2, prod_stack.marking)
            register_node(
                kubectl,
                domain.hostname,
                labels | nfd_labels(),
                taints,
                kubelet_report(domain, cfg.rke2.version, f"{domain.name}-boot-1"),
            )
        watch = Watch(kubectl, namespace, hosts)
        seen: dict[str, dict[str, Sample]] = {}
        pinned = cfg.gpu_operator.driver_version
        with running_gpu_operator(e2e_tools, plane, namespace) as log:
            watch.until(
                "every node on the pinned driver, its upgrade state done",
                lambda now: all(s.driver == pinned and s.state == DONE for s in now.values()),
            )
            seen["installed"] = watch.sample()
            settled = len(watch.samples["dc1"])
            stored = kubectl.json("get", "clusterpolicies.nvidia.com", "cluster-policy")["spec"]["driver"][
                "upgradePolicy"
            ]
            run_scenario(plane, watch, seen, log)
        policy = cluster_policy(objects)["spec"]["driver"]["upgradePolicy"]
        yield Scenario(watch, seen, log, policy, stored, pinned, settled)


def reconciles_since(log: Path, offset: int) -> list[dict[str, Any]]:
    """The upgrade controller's "Upgrades in progress" reports (one per reconcile) written after `offset`."""
    lines = log.read_bytes()[offset:].decode(errors="replace").splitlines()
    reports = []
    for line in lines:
        if "Upgrades in progress" in line:
            start = line.find("{")
            reports.append(json.loads(line[start:]) if start >= 0 else {"line": line})
    return reports


def run_scenario(plane: ControlPlane, watch: Watch, seen: dict[str, dict[str, Sample]], log: Path) -> None:
    kubectl, hosts = plane.kubectl, watch.hosts
    new, newer = BUMPS
    # 1. A bump with no node cordoned: every node becomes upgrade-required, and reconcile after reconcile finds no
    #    upgrade slot: none moves on.
    offset = log.stat().st_size
    bump(kubectl, new)
    watch.until("every node upgrade-required", lambda now: all(s.state == REQUIRED for s in now.values()))
    watch.until(
        "two reconciles of the upgrade controller with every node required",
        lambda now: len(reconciles_since(log, offset)) >= 2 and all(s.state == REQUIRED for s in now.values()),
    )
    seen["bumped, none cordoned"] = watch.sample()
    # 2. The wave cordons dc1 (after the bump, as it drains its first domain): dc1 alone is upgraded.
    cordon(kubectl, hosts["dc1"])
    watch.until("dc1 upgraded", lambda now: now["dc1"].state == DONE and now["dc1"].driver == new)
    seen["dc1 cordoned after the bump, upgraded"] = watch.sample()
    kubectl("uncordon", hosts["dc1"])
    # 3. dc2 cordoned after the bump with the operator's initial-state mark, as a drain can set it.
    cordon(kubectl, hosts["dc2"], as_initial_state=True)
    watch.until("dc2 upgraded", lambda now: now["dc2"].state == DONE and now["dc2"].driver == new)
    seen["dc2 cordoned and marked after the bump, upgraded"] = watch.sample()
    kubectl("uncordon", hosts["dc2"])
    cordon(kubectl, hosts["dc3"])
    watch.until("dc3 upgraded", lambda now: now["dc3"].state == DONE and now["dc3"].driver == new)
    kubectl("uncordon", hosts["dc3"])
    seen["first bump done"] = watch.sample()
    # 4. dc3 cordoned before the next bump (a node someone already took out): it alone proceeds, and stays cordoned.
    cordon(kubectl, hosts["dc3"])
    bump(kubectl, newer)
    watch.until("dc3 upgraded again", lambda now: now["dc3"].state == DONE and now["dc3"].driver == newer)
    seen["dc3 cordoned before the bump, upgraded"] = watch.sample()
    assert node_ready(kubectl, hosts["dc3"])


def test_the_chart_and_the_crd_keep_the_upgrade_policy_the_program_passes_for_waves(
    scenario: Scenario, prod_stack: Previewed
) -> None:
    assert release_values(prod_stack)["driver"]["upgradePolicy"] == dict(DRIVER_UPGRADE_POLICY)
    assert (scenario.policy_rendered["autoUpgrade"], scenario.policy_rendered["maxUnavailable"]) == (True, 0)
    assert (scenario.policy_stored["autoUpgrade"], scenario.policy_stored["maxUnavailable"]) == (True, 0)


def test_an_integer_zero_max_unavailable_is_rendered_as_the_charts_25_percent(
    e2e_tools: Tools, upstream: Path, prod_stack: Previewed, tmp_path: Path
) -> None:
    # templates/clusterpolicy.yaml: `maxUnavailable : {{ .Values.driver.upgradePolicy.maxUnavailable | default "25%" }}`
    archive = package_chart(e2e_tools, upstream, tmp_path)
    values = release_values(prod_stack)
    values["driver"]["upgradePolicy"]["maxUnavailable"] = 0
    objects = render(e2e_tools, archive, tmp_path / "render", "gpu-operator", values)
    assert cluster_policy(objects)["spec"]["driver"]["upgradePolicy"]["maxUnavailable"] == "25%"


def test_a_driver_bump_upgrades_no_node_until_one_is_cordoned(scenario: Scenario) -> None:
    seen = scenario.seen["bumped, none cordoned"]
    assert {d: (s.state, s.driver, s.unschedulable) for d, s in seen.items()} == {
        d: (REQUIRED, scenario.pinned, False) for d in seen
    }


def test_a_cordoned_node_is_upgraded_alone_and_never_two_nodes_are_out_at_once(scenario: Scenario) -> None:
    new = BUMPS[0]
    after_dc1 = scenario.seen["dc1 cordoned after the bump, upgraded"]
    assert (after_dc1["dc1"].state, after_dc1["dc1"].driver) == (DONE, new)
    assert {d: (after_dc1[d].state, after_dc1[d].driver) for d in ("dc2", "dc3")} == {
        "dc2": (REQUIRED, scenario.pinned),
        "dc3": (REQUIRED, scenario.pinned),
    }
    samples = scenario.watch.samples
    moments = range(scenario.settled, len(samples["dc1"]))
    most = max(sum(out_of_service(samples[d][i]) for d in samples) for i in moments)
    assert most == 1, f"at most one node may be out at any time; {most} were"


def test_a_node_cordoned_before_the_bump_stays_cordoned_after_its_upgrade(scenario: Scenario) -> None:
    seen = scenario.seen["dc3 cordoned before the bump, upgraded"]
    assert (seen["dc3"].state, seen["dc3"].driver, seen["dc3"].unschedulable) == (DONE, BUMPS[1], True)
    assert {d: (seen[d].state, seen[d].driver) for d in ("dc1", "dc2")} == {
        "dc1": (REQUIRED, BUMPS[0]),
        "dc2": (REQUIRED, BUMPS[0]),
    }


def test_a_node_cordoned_after_the_bump_is_uncordoned_by_the_operator_unless_marked_as_initially_cordoned(
    scenario: Scenario,
) -> None:
    """The operator records a node's cordon only when it marks the node upgrade-required (common_manager.go
    ProcessDoneOrUnknownNodes); a node the wave cordons later is uncordoned when the operator is done with it,
    before the wave's own gate, unless the drain also sets the operator's initial-state annotation."""
    dc1 = scenario.seen["dc1 cordoned after the bump, upgraded"]["dc1"]
    assert (dc1.state, dc1.unschedulable) == (DONE, False)
    dc2 = scenario.seen["dc2 cordoned and marked after the bump, upgraded"]["dc2"]
    assert (dc2.state, dc2.unschedulable) == (DONE, True)
