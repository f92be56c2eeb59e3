"""A chart-values change that keeps the driver version is a wave too, through the GPU Operator's own upgrade controller
(issue 47, FIELD-REVIEW-6 WRONG-1).

On the `deployed` stack (tests/e2e/engine_deployed.py: the operator v26.7.0 built from source runs the ClusterPolicy
the release installed, `driver.upgradePolicy.maxUnavailable` the program's "0"), one `pulumi up` moves
`gpuOperator.kernelModuleType` from `auto` to `open`, the driver version kept. That rewrites the driver DaemonSet's
pod template (TransformDriver sets KERNEL_MODULE_TYPE), so the operator marks every GPU node `upgrade-required`; with
no slot of its own it moves only a cordoned node. Before it, a GPU workload runs on dc3, the last domain in the
wave's order. Every GPU node is sampled twice a second throughout (tests/e2e/upgrade_watch.py), and the workload's
pod too. One scenario pays for every assertion (each wave of `up` costs the operator's reconciles); the next `up`
puts prod back, a wave again, for the modules after this one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.gpu_platform.driver_template import stack_driver_template
from components.stack_check import validate_stack
from knowledge.gpu_operator import DRIVER_POD_SELECTOR, DRIVER_UPGRADE_STATE_LABEL
from offline.runner import PROJECT
from tests.e2e.engine_deployed import Deployed, rewrite_config, up_settled
from tests.e2e.kube import Kubectl
from tests.e2e.test_driver_wave import first_out
from tests.e2e.test_driver_wave_adversity import (
    delete_namespace,
    gpu_container,
    new_namespace,
    preferring,
    running_pods,
    wait_for,
)
from tests.e2e.upgrade_watch import DONE, REQUIRED, SAMPLE_SECONDS, Sample, Watch, domain_out, sampling

WORKLOADS = "e2e-template-wave"
WORKLOAD = "waiting-trainer"
NEW_MODULE_TYPE = "open"


@dataclass(frozen=True)
class PodSample:
    at: float
    pods: tuple[tuple[str, str, str], ...]  # (uid, node, phase) of each pod of the workload not being deleted


@dataclass
class Rolled:
    order: list[str]
    hosts: dict[str, str]
    template: str  # the driver template's digest the stack asks for after the change
    moments: list[dict[str, Sample]]
    errors: list[str]
    states: dict[str, set[str]]
    workload: list[PodSample]
    before: tuple[str, str]  # the workload's pod (uid, node) when the `up` started
    policy: dict[str, Any]
    labels: dict[str, str]  # each domain's upgrade state after the `up`
    ready_after: float  # seconds from the end of the `up` until the ClusterPolicy read ready
    driver_pods: list[dict[str, Any]]  # the driver DaemonSet's pods after the `up`
    stdout: str = ""
    failures: list[str] = field(default_factory=list)


def trainer(host: str) -> dict[str, Any]:
    labels = {"app": WORKLOAD}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": WORKLOAD, "namespace": WORKLOADS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": preferring(host, labels, [gpu_container("train")]),
        },
    }


@contextlib.contextmanager
def following_workload(kubectl: Kubectl, found: list[PodSample]) -> Iterator[None]:
    """The workload's pods, every SAMPLE_SECONDS, until the block ends."""
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            pods = kubectl.api.items(f"/api/v1/namespaces/{WORKLOADS}/pods", f"app={WORKLOAD}")
            found.append(
                PodSample(
                    time.monotonic(),
                    tuple(
                        (p["metadata"]["uid"], p["spec"].get("nodeName", ""), p["status"].get("phase", ""))
                        for p in pods
                        if not p["metadata"].get("deletionTimestamp")
                    ),
                )
            )
            stopping.wait(SAMPLE_SECONDS)

    thread = threading.Thread(target=loop, name="workload-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join(timeout=60)


def _stack(config: dict[str, Any]) -> Any:
    return validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in config.items() if k.startswith(f"{PROJECT}:")})


@pytest.fixture(scope="module")
def rolled(deployed: Deployed) -> Iterator[Rolled]:
    kubectl = deployed.plane.kubectl
    base = deployed.base
    namespace = str(base[f"{PROJECT}:gpuOperator"].get("namespace", "gpu-operator"))
    hosts = {d["name"]: d["hostname"] for d in base[f"{PROJECT}:failureDomains"]}
    order = list(hosts)
    last = order[-1]
    assert base[f"{PROJECT}:gpuOperator"].get("kernelModuleType", "auto") != NEW_MODULE_TYPE

    def changed(config: dict[str, Any]) -> None:
        config[f"{PROJECT}:gpuOperator"]["kernelModuleType"] = NEW_MODULE_TYPE

    after = deployed.config_with(changed)
    assert _stack(after).gpu_operator.driver_version == _stack(base).gpu_operator.driver_version
    template = stack_driver_template(_stack(after))
    assert template != stack_driver_template(_stack(base))
    new_namespace(kubectl, WORKLOADS)
    try:
        kubectl.create(trainer(hosts[last]), field_manager="e2e")
        (pod,) = wait_for(f"{WORKLOAD} running", lambda: running_pods(kubectl, WORKLOADS, f"app={WORKLOAD}"))
        assert pod["spec"]["nodeName"] == hosts[last], f"{WORKLOAD} was placed on {pod['spec']['nodeName']}"
        watch = Watch(kubectl, namespace, hosts)
        workload: list[PodSample] = []
        rewrite_config(deployed.stack, after)
        with sampling(watch), following_workload(kubectl, workload):
            done = up_settled(deployed)
        nodes = {n["metadata"]["name"]: n for n in kubectl.json("get", "nodes")["items"]}
        ended = time.monotonic()

        def policy() -> dict[str, Any] | None:
            found: dict[str, Any] = kubectl.json("get", "clusterpolicies.nvidia.com", "cluster-policy")
            return found if (found.get("status") or {}).get("state") == "ready" else None

        # The operator sets the ClusterPolicy's state at its own reconcile after the last driver pod is replaced:
        # read as soon as the `up` ended, waited for only as long as that reconcile takes (the time is asserted).
        ready = wait_for("the ClusterPolicy ready", policy)
        ready_after = time.monotonic() - ended
        driver_pods = kubectl.json("-n", namespace, "get", "pods", "-l", DRIVER_POD_SELECTOR)["items"]
        yield Rolled(
            order,
            hosts,
            template,
            watch.moments(),
            watch.errors,
            {d: watch.states_seen(d) for d in hosts},
            workload,
            (pod["metadata"]["uid"], pod["spec"]["nodeName"]),
            ready,
            {
                d: (nodes[h]["metadata"].get("labels") or {}).get(DRIVER_UPGRADE_STATE_LABEL, "")
                for d, h in hosts.items()
            },
            ready_after,
            driver_pods,
            done.stdout,
        )
    finally:
        delete_namespace(kubectl, WORKLOADS)
        # prod as deployed, for the modules after this one: a wave back to `auto`.
        rewrite_config(deployed.stack, base)
        up_settled(deployed)


def test_the_watcher_saw_every_moment_of_the_wave(rolled: Rolled) -> None:
    assert not rolled.errors, rolled.errors[:3]
    assert len(rolled.moments) > 10 and len(rolled.workload) > 10


def test_a_kernel_module_type_change_with_the_driver_kept_rolls_one_domain_at_a_time_in_the_waves_order(
    rolled: Rolled,
) -> None:
    out = [sorted(d for d, s in moment.items() if domain_out(s)) for moment in rolled.moments]
    assert max(len(o) for o in out) == 1, max(out, key=len)
    assert first_out(rolled.moments) == rolled.order


def test_the_operator_replaced_each_driver_pod_through_its_own_states_only_once_the_wave_cordoned_the_node(
    rolled: Rolled,
) -> None:
    for domain in rolled.order:
        # The upgrade controller's own states between required and done (k8s-operator-libs pkg/upgrade/consts.go).
        assert rolled.states[domain] - {"", DONE, REQUIRED}, (domain, rolled.states[domain])
        for moment in rolled.moments:
            sample = moment[domain]
            if sample.state not in ("", DONE, REQUIRED):
                assert sample.unschedulable, (domain, sample)


def test_a_domain_waiting_for_its_turn_is_left_in_upgrade_required_by_the_operator_and_keeps_serving(
    rolled: Rolled,
) -> None:
    """With maxUnavailable "0" the operator marks every node but moves none of its own: the last domain sat in
    upgrade-required, schedulable, while the others rolled (upgrade_inplace.go: no slots, `continue`)."""
    last = rolled.order[-1]
    seen = [m[last] for m in rolled.moments]
    turn = next(i for i, s in enumerate(seen) if domain_out(s))
    waiting = seen[:turn]
    assert any(s.state == REQUIRED for s in waiting), {s.state for s in waiting}
    assert not any(s.unschedulable for s in waiting)


def test_a_gpu_pod_on_a_domain_not_yet_in_its_turn_keeps_running_until_its_turn(rolled: Rolled) -> None:
    last = rolled.order[-1]
    uid, node = rolled.before
    assert node == rolled.hosts[last]
    seen = [m[last] for m in rolled.moments]
    turn_at = next(s.at for s in seen if domain_out(s))
    others_out = [m for m in rolled.moments if any(domain_out(m[d]) for d in rolled.order[:-1])]
    assert others_out, "no other domain was ever out"
    before_turn = [w for w in rolled.workload if w.at < turn_at]
    assert before_turn and all(w.pods == ((uid, node, "Running"),) for w in before_turn), [
        w.pods for w in before_turn if w.pods != ((uid, node, "Running"),)
    ][:3]


def test_each_node_stays_cordoned_from_its_turn_until_the_turns_gate_ran_and_recorded_the_new_template(
    rolled: Rolled,
) -> None:
    for domain in rolled.order:
        seen = [m[domain] for m in rolled.moments]
        first = next(i for i, s in enumerate(seen) if domain_out(s))
        early = [
            (round(s.at - seen[first].at, 1), s.state, s.template)
            for s in seen[first:]
            if not s.unschedulable and s.template != rolled.template
        ]
        assert not early, f"{domain} served again before its turn recorded the new driver template: {early[:3]}"
        assert seen[-1].template == rolled.template and not seen[-1].unschedulable


def test_up_ends_with_the_clusterpolicy_ready_and_no_node_left_in_upgrade_required(rolled: Rolled) -> None:
    assert rolled.policy["status"]["state"] == "ready", rolled.policy.get("status")
    # Its next reconcile at most (nudged every few seconds here): not a node still on the older revision.
    assert rolled.ready_after < 60, rolled.ready_after
    assert rolled.policy["spec"]["driver"]["kernelModuleType"] == NEW_MODULE_TYPE
    assert rolled.labels == {d: DONE for d in rolled.order}


def test_every_driver_pod_runs_the_new_template_on_the_driver_it_ran_before(rolled: Rolled) -> None:
    """The operator's KERNEL_MODULE_TYPE (object_controls.go transformDriverContainer) reached a new pod on every
    node, on the same driver image."""
    on = {}
    for pod in rolled.driver_pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        container = next(c for c in pod["spec"]["containers"] if c["name"] == "nvidia-driver-ctr")
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        on[pod["spec"]["nodeName"]] = (
            env.get("KERNEL_MODULE_TYPE"),
            container["image"].rsplit(":", 1)[1].split("-")[0],
        )
    assert on == {host: (NEW_MODULE_TYPE, rolled.moments[0][d].driver) for d, host in rolled.hosts.items()}
