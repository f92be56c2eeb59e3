"""A driver wave where the cluster fights back, with the GPU Operator's own upgrade controller (issue 36 item 7,
FIELD-REVIEW-5 WRONG-1 and WRONG-2).

On the `deployed` stack (tests/e2e/engine_deployed.py; the operator v26.7.0 built from source runs the ClusterPolicy
the release installed, nudged to reconcile every few seconds), one story of three `pulumi up`s, each watched from
start to end (tests/e2e/upgrade_watch.py samples every GPU node's operator upgrade state twice a second):
(a) the driver moves to 580.173.02 through nodes running GPU work: a notebook StatefulSet whose pod mounts an emptyDir
    `/dev/shm` (medium Memory, as Kubeflow's spawner does) and a trainer Deployment whose PodDisruptionBudget allows
    no disruption. The operator's GPU-pod deletion timeout is shortened on the live ClusterPolicy (the chart value is
    guarded in the stack file: gpuPodDeletion.timeoutSeconds is the wave's drain timeout) to SHORT_TIMEOUT seconds;
    the trainer's budget blocks dc1's drain for longer than that, while the operator reconciles again and again, and
    stays well inside the wave's 15-minute drain, until the test scales the trainer. The wave completes; no node is
    ever `upgrade-failed`.
(b) back to the pinned driver with a bare GPU pod (no controller, an admin's debugging pod) on dc1: the wave's drain
    refuses it, the `up` fails, dc1's `wave-stopped` note names the pod, its turn-state is `stopped`, and while the
    operator reconciles again and again dc1 never goes `upgrade-failed` (the wave's skip label holds it off).
(c) the admin deletes the pod; dc1 is then marked `upgrade-failed` as the operator marks it (its driver pod is on the
    older revision, which is what the operator's pod deletion leaves behind), and the operator, reconciling, leaves it
    there (k8s-operator-libs ProcessUpgradeFailedNodes waits for an in-sync driver pod; the DaemonSet is OnDelete).
    The next `up` resumes dc1's turn: its gate deletes the out-of-sync driver pod, the DaemonSet recreates it on the
    newest revision, the operator moves dc1 on, and the wave completes: prod as deployed.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import (
    REPAIRS_ANNOTATION,
    TURN_STATE_LABEL,
    WAVE_CORDON_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
)
from config.rollout import DRAIN_TIMEOUT_SECONDS
from knowledge.gpu_operator import DRIVER_UPGRADE_FAILED, DRIVER_UPGRADE_SKIP_LABEL, DRIVER_UPGRADE_STATE_LABEL
from offline.runner import PROJECT
from tests.e2e.cluster_programs import operator_log
from tests.e2e.engine_deployed import Deployed, rewrite_config, up_settled
from tests.e2e.kube import Kubectl
from tests.e2e.upgrade_watch import DONE, REQUIRED, Sample, Watch, sampling

OTHER_DRIVER = "580.173.02"
WORKLOADS = "e2e-notebooks"
DEBUG = "e2e-debug"
BARE_POD = "gpu-debug"
# The operator's GPU-pod deletion timeout during (a): far below the wave's drain timeout, so that a budget the wave
# waits out is one the operator would have given up on (its default is 300 s, the wave's 900 s).
SHORT_TIMEOUT = 10
# How many times the operator reconciles (it is nudged every few seconds: tests/e2e/cluster_programs.py) while a
# budget blocks, or while a stopped or failed node is watched: each is a chance for it to act on the node.
RECONCILES = 8
UP_SECONDS = 900
# What the gate prints when it replaces a driver pod left on an older revision (node_steps_script.py).
REPLACED = "deleted it, so the operator's DaemonSet recreates it"


class Reconciles:
    """How many times the operator's upgrade controller has started a reconcile, read from its log as it grows."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0
        self.count = 0

    def now(self) -> int:
        with self.log.open("rb") as text:
            text.seek(self.offset)
            chunk = text.read()
        # Only whole lines: a line being written is counted once it ends.
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        self.count += whole.count(b"Reconciling Upgrade")
        return self.count


@dataclass
class Phase:
    """One `up` of the story, as the watcher saw it."""

    up: subprocess.CompletedProcess[str] | None = None
    moments: list[dict[str, Sample]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)


@dataclass
class Story:
    hosts: dict[str, str]
    pinned: str
    phases: dict[str, Phase] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def phase(self, name: str) -> Phase:
        if name in self.failed:
            pytest.fail(f"phase {name} failed: {self.failed[name]}")
        return self.phases[name]


def wait_for(what: str, check: Callable[[], Any], running: concurrent.futures.Future[Any] | None = None) -> Any:
    """Poll `check` until truthy; an `up` that ended first fails with its own error."""
    deadline = time.monotonic() + UP_SECONDS
    while True:
        found = check()
        if found:
            return found
        if running is not None and running.done():
            running.result()
            raise AssertionError(f"the up ended before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {UP_SECONDS} s: {what}")
        time.sleep(0.5)  # poll interval; bounded by the deadline above


def gpu_container(name: str, mounts: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example/{name}:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        **({"volumeMounts": mounts} if mounts else {}),
    }


def preferring(host: str, labels: dict[str, str], containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A pod template preferring `host` (Kyverno adds the GPU toleration and node rule at admission)."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}
    return {
        "metadata": {"labels": labels},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
                }
            },
            "containers": containers,
            **spec,
        },
    }


def notebook(host: str) -> dict[str, Any]:
    """A Kubeflow notebook as its spawner makes it: a StatefulSet, shared memory as an emptyDir in memory."""
    labels = {"app": "notebook"}
    shm = [{"name": "dshm", "mountPath": "/dev/shm"}]
    template = preferring(
        host, labels, [gpu_container("notebook", shm)], volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "notebook", "namespace": WORKLOADS},
        "spec": {
            "replicas": 1,
            "serviceName": "notebook",
            "selector": {"matchLabels": labels},
            "template": template,
        },
    }


def trainer(host: str) -> dict[str, Any]:
    labels = {"app": "trainer"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": WORKLOADS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": preferring(host, labels, [gpu_container("train")]),
        },
    }


def budget() -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer", "namespace": WORKLOADS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
    }


def bare_pod(host: str) -> dict[str, Any]:
    """`kubectl run --overrides` with a GPU: a pod no controller owns."""
    template = preferring(host, {"run": BARE_POD}, [gpu_container("debug")])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": BARE_POD, "namespace": DEBUG, **template["metadata"]},
        "spec": template["spec"],
    }


def running_pods(kubectl: Kubectl, namespace: str, selector: str) -> list[dict[str, Any]]:
    pods = kubectl.api.items(f"/api/v1/namespaces/{namespace}/pods", selector)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]


def hosts_of(kubectl: Kubectl, namespace: str, selector: str) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in running_pods(kubectl, namespace, selector))


def new_namespace(kubectl: Kubectl, name: str) -> None:
    kubectl.ensure_namespace(name)
    wait_for(
        f"{name}'s default ServiceAccount", lambda: kubectl.run("-n", name, "get", "sa", "default").returncode == 0
    )


def delete_namespace(kubectl: Kubectl, name: str) -> None:
    kubectl.run("delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=120s")


def pod_deletion(kubectl: Kubectl) -> tuple[str, dict[str, Any]]:
    """The ClusterPolicy's name and the operator's GPU-pod deletion settings as it reads them."""
    (policy,) = kubectl.json("get", "clusterpolicies.nvidia.com")["items"]
    return policy["metadata"]["name"], policy["spec"]["driver"]["upgradePolicy"]["podDeletion"]


def set_pod_deletion_timeout(kubectl: Kubectl, seconds: int) -> None:
    name, _ = pod_deletion(kubectl)
    patch = {"spec": {"driver": {"upgradePolicy": {"podDeletion": {"timeoutSeconds": seconds}}}}}
    kubectl("patch", "clusterpolicies.nvidia.com", name, "--type=merge", "-p", json.dumps(patch))


def node(kubectl: Kubectl, host: str) -> dict[str, Any]:
    found: dict[str, Any] = kubectl.api.call("GET", f"/api/v1/nodes/{host}")
    assert found is not None, f"no Node {host}"
    return found


def watch_for(deployed: Deployed, story: Story) -> Watch:
    namespace = str(deployed.base[f"{PROJECT}:gpuOperator"].get("namespace", "gpu-operator"))
    return Watch(deployed.plane.kubectl, namespace, story.hosts)


def watched_reconciles(reconciles: Reconciles, watch: Watch, what: str, hold: Callable[[], bool]) -> int:
    """Sample until the operator has reconciled RECONCILES more times, `hold` true throughout; returns the count."""
    start = reconciles.now()

    def enough() -> bool:
        watch.sample()
        assert hold(), f"{what}: no longer so after {reconciles.now() - start} reconciles"
        return reconciles.now() >= start + RECONCILES

    wait_for(f"{RECONCILES} reconciles of the operator while {what}", enough)
    return reconciles.now() - start


def phase_workloads(deployed: Deployed, story: Story, reconciles: Reconciles) -> Phase:
    kubectl = deployed.plane.kubectl
    dc1 = story.hosts["dc1"]
    phase = Phase()
    new_namespace(kubectl, WORKLOADS)
    for obj in (notebook(dc1), trainer(dc1), budget()):
        kubectl.create(obj, field_manager="e2e")
    for app in ("notebook", "trainer"):
        placed = wait_for(f"the {app} running", functools.partial(hosts_of, kubectl, WORKLOADS, f"app={app}"))
        assert placed == [dc1], f"the {app} was placed on {placed}, not dc1"
    set_pod_deletion_timeout(kubectl, SHORT_TIMEOUT)

    def bumped(config: dict[str, Any]) -> None:
        config[f"{PROJECT}:gpuOperator"]["driverVersion"] = OTHER_DRIVER

    rewrite_config(deployed.stack, deployed.config_with(bumped))
    watch = watch_for(deployed, story)
    with sampling(watch), concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(up_settled, deployed)

        def refused_on_dc1() -> bool:
            annotations = node(kubectl, dc1)["metadata"].get("annotations") or {}
            return annotations.get(WAVE_CORDON_ANNOTATION) == "dc1" and hosts_of(kubectl, WORKLOADS, "app=trainer") == [
                dc1
            ]

        wait_for("dc1 cordoned by the wave, its trainer still there", refused_on_dc1, running)
        started = time.monotonic()
        phase.seen["podDeletion"] = pod_deletion(kubectl)[1]
        # The budget blocks while the operator reconciles, again and again, for longer than its deletion timeout.
        count = reconciles.now()
        wait_for(
            "the budget blocking for longer than the operator's pod-deletion timeout",
            lambda: (
                refused_on_dc1()
                and reconciles.now() >= count + RECONCILES
                and time.monotonic() - started > 2 * SHORT_TIMEOUT
            ),
            running,
        )
        phase.seen["blocked"] = {"seconds": time.monotonic() - started, "reconciles": reconciles.now() - count}
        kubectl("-n", WORKLOADS, "scale", "deployment", "trainer", "--replicas=2")
        phase.up = running.result(timeout=UP_SECONDS)
    phase.moments, phase.errors = watch.moments(), watch.errors
    phase.seen["notebook"] = running_pods(kubectl, WORKLOADS, "app=notebook")
    return phase


def phase_stopped(deployed: Deployed, story: Story, reconciles: Reconciles) -> Phase:
    kubectl = deployed.plane.kubectl
    dc1 = story.hosts["dc1"]
    phase = Phase()
    delete_namespace(kubectl, WORKLOADS)
    new_namespace(kubectl, DEBUG)
    kubectl.create(bare_pod(dc1), field_manager="e2e")
    placed = wait_for("the debugging pod running", lambda: hosts_of(kubectl, DEBUG, f"run={BARE_POD}"))
    assert placed == [dc1], f"the debugging pod was placed on {placed}, not dc1"
    rewrite_config(deployed.stack, deployed.base)
    watch = watch_for(deployed, story)
    with sampling(watch):
        phase.up = deployed.stack.run("up", "--yes", "--skip-preview", check=False)
        phase.seen["reconciles"] = watched_reconciles(
            reconciles,
            watch,
            "dc1 stays stopped at its drain",
            lambda: (node(kubectl, dc1)["metadata"].get("labels") or {}).get(TURN_STATE_LABEL) == "stopped",
        )
    phase.moments, phase.errors = watch.moments(), watch.errors
    phase.seen["dc1"] = node(kubectl, dc1)
    return phase


def phase_recovered(deployed: Deployed, story: Story, reconciles: Reconciles) -> Phase:
    kubectl = deployed.plane.kubectl
    dc1 = story.hosts["dc1"]
    phase = Phase()
    delete_namespace(kubectl, DEBUG)
    # As the operator marks it (NodeUpgradeStateProvider.ChangeNodeUpgradeState writes this label).
    kubectl("label", "node", dc1, "--overwrite", f"{DRIVER_UPGRADE_STATE_LABEL}={DRIVER_UPGRADE_FAILED}")
    watch = watch_for(deployed, story)
    with sampling(watch):
        phase.seen["reconciles"] = watched_reconciles(
            reconciles,
            watch,
            "the operator leaves dc1 upgrade-failed on its own",
            lambda: (
                (node(kubectl, dc1)["metadata"].get("labels") or {}).get(DRIVER_UPGRADE_STATE_LABEL)
                == DRIVER_UPGRADE_FAILED
            ),
        )
        phase.seen["before"] = len(watch.moments())
        phase.up = up_settled(deployed)
    phase.moments, phase.errors = watch.moments(), watch.errors
    phase.seen["dc1"] = node(kubectl, dc1)
    return phase


def restore(deployed: Deployed, story: Story) -> None:
    """prod as deployed, for the tests after this module, whatever phase failed."""
    kubectl = deployed.plane.kubectl
    for namespace in (WORKLOADS, DEBUG):
        delete_namespace(kubectl, namespace)
    if pod_deletion(kubectl)[1].get("timeoutSeconds") != DRAIN_TIMEOUT_SECONDS:
        set_pod_deletion_timeout(kubectl, DRAIN_TIMEOUT_SECONDS)
    if story.failed:
        rewrite_config(deployed.stack, deployed.base)
        up_settled(deployed)


@pytest.fixture(scope="module")
def story(deployed: Deployed) -> Iterator[Story]:
    hosts = {d["name"]: d["hostname"] for d in deployed.base[f"{PROJECT}:failureDomains"]}
    told = Story(hosts, str(deployed.base[f"{PROJECT}:gpuOperator"]["driverVersion"]))
    reconciles = Reconciles(operator_log(deployed.plane))
    reconciles.now()
    phases = {"workloads": phase_workloads, "stopped": phase_stopped, "recovered": phase_recovered}
    try:
        for name, run in phases.items():
            try:
                told.phases[name] = run(deployed, told, reconciles)
            except Exception as error:  # each test reports the phase it needs; the next phases still run
                told.failed[name] = f"{type(error).__name__}: {error}"[:4000]
        yield told
    finally:
        restore(deployed, told)


def states_of(moments: list[dict[str, Sample]], domain: str) -> list[str]:
    seen: list[str] = []
    for moment in moments:
        if not seen or seen[-1] != moment[domain].state:
            seen.append(moment[domain].state)
    return seen


def never_failed(phase: Phase) -> dict[str, list[str]]:
    return {
        domain: states_of(phase.moments, domain)
        for domain in phase.moments[0]
        if any(m[domain].state == DRIVER_UPGRADE_FAILED for m in phase.moments)
    }


def test_a_driver_wave_through_a_notebook_with_shared_memory_and_a_blocking_budget_completes_without_upgrade_failed(
    story: Story,
) -> None:
    phase = story.phase("workloads")
    assert not phase.errors, phase.errors[:3]
    assert len(phase.moments) > 10
    print(
        "e2e-summary (a):",
        len(phase.moments),
        "samples;",
        phase.seen["blocked"],
        phase.seen["podDeletion"],
        {d: states_of(phase.moments, d) for d in story.hosts},
    )
    assert never_failed(phase) == {}, "a node went upgrade-failed during the wave"
    # The budget held dc1's drain for longer than the operator's deletion timeout, while it reconciled.
    assert phase.seen["podDeletion"] == {"deleteEmptyDir": True, "force": False, "timeoutSeconds": SHORT_TIMEOUT}
    assert phase.seen["blocked"]["seconds"] > SHORT_TIMEOUT and phase.seen["blocked"]["reconciles"] >= RECONCILES
    last = phase.moments[-1]
    assert {d: (s.driver, s.state, s.unschedulable) for d, s in last.items()} == {
        d: (OTHER_DRIVER, DONE, False) for d in last
    }
    # The notebook was evicted with its in-memory emptyDir by the waves' drains, and serves again.
    (pod,) = phase.seen["notebook"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["spec"]["volumes"]


def test_a_bare_gpu_pod_stops_the_wave_at_its_own_drain_naming_the_pod_and_the_node_never_goes_upgrade_failed(
    story: Story,
) -> None:
    phase = story.phase("stopped")
    assert phase.up is not None
    output = phase.up.stdout + phase.up.stderr
    assert phase.up.returncode != 0, output[-3000:]
    assert not phase.errors, phase.errors[:3]
    metadata = phase.seen["dc1"]["metadata"]
    stopped = metadata["annotations"].get(WAVE_STOPPED_ANNOTATION, "")
    print("e2e-summary (b):", len(phase.moments), "samples;", phase.seen["reconciles"], "reconciles;", stopped)
    print("e2e-summary (b) states:", {d: states_of(phase.moments, d) for d in story.hosts})
    assert never_failed(phase) == {}, "a node went upgrade-failed while the wave was stopped"
    assert f"{DEBUG}/{BARE_POD}" in stopped, stopped
    # kubectl's own refusal, and no claim of a timeout: it refused at once.
    assert stopped.startswith("the drain failed") and "declare no controller" in stopped, stopped
    assert metadata["labels"][TURN_STATE_LABEL] == "stopped"
    # The wave's skip label keeps the operator off the stopped node, which it left in upgrade-required.
    assert metadata["labels"].get(DRIVER_UPGRADE_SKIP_LABEL) == "true"
    assert metadata["labels"].get(DRIVER_UPGRADE_STATE_LABEL) == REQUIRED
    assert phase.seen["dc1"]["spec"].get("unschedulable") is True
    assert phase.seen["reconciles"] >= RECONCILES
    # The other domains were never drained: the wave stopped at dc1.
    for domain in ("dc2", "dc3"):
        assert not any(m[domain].unschedulable for m in phase.moments), domain


def test_an_upgrade_failed_node_recovers_on_the_next_up_whose_turn_replaces_its_out_of_sync_driver_pod(
    story: Story,
) -> None:
    phase = story.phase("recovered")
    assert phase.up is not None
    output = phase.up.stdout + phase.up.stderr
    assert not phase.errors, phase.errors[:3]
    # The operator on its own left dc1 failed while it reconciled (its driver pod is on the older revision).
    assert phase.seen["reconciles"] >= RECONCILES
    assert REPLACED in output, output[-3000:]
    records = json.loads(phase.seen["dc1"]["metadata"]["annotations"].get(REPAIRS_ANNOTATION) or "[]")
    assert any(r.get("event") == "driver-pod-deleted" for r in records), records
    during = phase.moments[phase.seen["before"] :]
    print("e2e-summary (c):", len(during), "samples;", {d: states_of(during, d) for d in story.hosts}, records)
    assert states_of(during, "dc1")[0] == DRIVER_UPGRADE_FAILED
    assert {d: s for d, s in never_failed(Phase(moments=during)).items() if d != "dc1"} == {}
    last = phase.moments[-1]
    assert {d: (s.driver, s.state, s.unschedulable) for d, s in last.items()} == {
        d: (story.pinned, DONE, False) for d in last
    }
