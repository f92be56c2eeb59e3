"""The notebook reclaim policy (reclaim.idleNotebooks) end to end, with Kubeflow's own notebook controller.

On the session's control plane (kube-scheduler, kube-controller-manager, KWOK running the pods): Kubeflow's notebook
controller v1.11.0 built from source (e2e/build-cluster.sh), installed as its standalone overlay ships it (culling
off) and run as its ServiceAccount; GPU Nodes as GFD labels them; one Kubeflow Notebook per case, whose pods the
controller's StatefulSets make and the scheduler places. A real Prometheus holds dcgm-exporter's series for the cards
and the per-card rules recorded from them (tests/reclaim/recorded_cards.py); a second one scrapes the policy's
metrics and evaluates its alerts.

The policy's passes run in this process as its ServiceAccount, bound to exactly the ClusterRole the stack plans
(components/reclaim/objects.py), through node/'s Kube over REST: a request its table lacks is the API server's 403.
Its clock is set two hours after the pods were placed, so they have held their cards for the whole window (one hour
here) and the recorded series cover it.

One module, one setup (the controller, the Nodes, both Prometheus), each test on a pool made again from nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.reclaim.alerts import build_reclaim_alert_rules
from components.reclaim.names import NAME, RECLAIMED_AT, RECLAIMED_POD
from components.reclaim.objects import facts_document, plan_objects
from config.monitoring import MonitoringConfig
from config.reclaim import IdleNotebooksConfig
from day2.cli import main
from day2.metrics_http import serve_metrics
from day2.reclaim.judge import Action, Judgement, Reason
from day2.reclaim.policy import Metrics, PolicyFacts, Reclaimer, one_pass
from day2.reclaim.report import decision_json
from node.kube import Kube, Rest
from offline.runner import ROOT_DIR
from tests.day2.prometheus_server import running_prometheus
from tests.e2e.cluster_programs import running_notebook_controller
from tests.e2e.control_plane import ControlPlane, eventually, register_node
from tests.e2e.kube import Kubectl
from tests.e2e.servers import Tools
from tests.gpu_platform.prometheus_tools import require
from tests.reclaim.recorded_cards import RecordedCard, prometheus_with_cards

NS, QUEUE = "team-a", "queue"
HOURS = 1
# Simulated: the passes judge two hours after the pods were placed.
AHEAD = datetime.timedelta(hours=2)
IMAGE = "kubeflownotebookswg/jupyter-pytorch-cuda-full:v1.9.0"
FINALIZER = "example.com/hold"
# case -> (node, its card's utilisation; None: no series at all)
CASES: dict[str, tuple[str, float | None]] = {
    "idle": ("gpu-idle", 1.0),
    "busy": ("gpu-busy", 80.0),
    "kept": ("gpu-kept", 0.0),
    "lost": ("gpu-lost", None),
    "shared": ("gpu-shared", 0.0),
    "stuck": ("gpu-stuck", 0.0),
}
SLICED = "gpu-shared"
CONFIG = {
    "enabled": True,
    "prometheusUrl": "http://prometheus.test:9090",
    "idleHours": HOURS,
    "graceMinutes": 10,
    "maxPerHour": 5,
    "cardBackMinutes": 15,
}


def stamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node_status(slots: int) -> dict[str, Any]:
    machine = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": str(slots)}
    info = {
        "bootID": "reclaim-e2e",
        "kernelVersion": "6.8.0-51-generic",
        "kubeletVersion": "v1.33.5+rke2r1",
        "containerRuntimeVersion": "containerd://2.1.4-k3s2",
        "osImage": "Ubuntu 24.04 LTS",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    return {"capacity": machine, "allocatable": machine, "nodeInfo": info}


def notebook(name: str, node: str) -> dict[str, Any]:
    labels = {"gpu-pool.dev/keep-gpu": "true"} if name == "kept" else {}
    container = {
        "name": name,
        "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "600m", "memory": "1Gi"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"template": {"spec": {"containers": [container], "nodeSelector": {"kubernetes.io/hostname": node}}}},
    }


def gpu_pod(namespace: str, name: str, node: str | None = None) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "ghcr.io/example/trainer:2026.04",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


@dataclass
class Reclaim:
    """The module's setup: the cluster, the policy's account, both Prometheus and the metrics they scrape."""

    plane: ControlPlane
    token: str
    evidence_url: str
    alerts_url: str
    stack_dir: Path
    metrics: list[Metrics] = field(default_factory=lambda: [Metrics()])

    @property
    def kubectl(self) -> Kubectl:
        return self.plane.kubectl

    def runner(self, now: datetime.datetime, **config: Any) -> Reclaimer:
        cfg = IdleNotebooksConfig.model_validate({**CONFIG, "prometheusUrl": self.evidence_url, **config})
        facts = PolicyFacts.from_json(json.loads(json.dumps(facts_document(cfg))))
        rest = Rest(self.plane.cluster.url, self.token, str(self.plane.work / "ca.crt"))
        self.metrics[0] = Metrics(dry_run=facts.dry_run)
        return Reclaimer(
            Kube(rest, component="gpu-pool-reclaim"), facts, io.StringIO(), self.metrics[0], clock=lambda: now
        )

    def notebook(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.kubectl.json("-n", NS, "get", "notebook", name)
        return found

    def replicas(self, name: str) -> int:
        return int(self.kubectl.json("-n", NS, "get", "statefulset", name)["spec"]["replicas"])

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        done = self.kubectl.run("-n", namespace, "get", "pod", name, "-o", "json")
        return json.loads(done.stdout) if done.returncode == 0 else None

    def events(self) -> list[tuple[str, str]]:
        found = self.kubectl.json("-n", NS, "get", "events", "--field-selector", "involvedObject.kind=Notebook")
        return sorted(
            (e["involvedObject"]["name"], e["reason"])
            for e in found["items"]
            if e.get("source", {}).get("component") == NAME
        )

    def wait(self, namespace: str, name: str) -> dict[str, Any]:
        """A pod the scheduler could not place (PodScheduled False): what the policy counts as waiting."""

        def unschedulable() -> dict[str, Any] | None:
            pod = self.pod(namespace, name)
            conditions = (pod or {}).get("status", {}).get("conditions") or []
            return pod if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions) else None

        self.kubectl("apply", "-f", "-", stdin=json.dumps(gpu_pod(namespace, name)))
        placed: dict[str, Any] = eventually(f"{namespace}/{name} unschedulable", unschedulable, 60)
        return placed


def cards(start: datetime.datetime, end: datetime.datetime) -> list[RecordedCard]:
    return [
        RecordedCard(node, percent, (NS, f"{case}-0"), start, end)
        for case, (node, percent) in CASES.items()
        if percent is not None
    ]


def alert_config(metrics_port: int, rules: Path) -> str:
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": "gpu-pool-reclaim", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}
            ],
        }
    )


def _access(reclaim_cfg: IdleNotebooksConfig) -> list[dict[str, Any]]:
    planned = plan_objects(reclaim_cfg, MonitoringConfig(), {}, b"")
    return [
        o for o in planned.all() if o["kind"] in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")
    ]


def _stack_dir(directory: Path, url: str) -> Path:
    """The prod stack with the policy as this module runs it, for `claims --reclaimable --stack`."""
    shutil.copy(ROOT_DIR / "Pulumi.yaml", directory / "Pulumi.yaml")
    stack = yaml.safe_load((ROOT_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    stack["config"]["gpu-pool:reclaim"] = {"idleNotebooks": {**CONFIG, "prometheusUrl": url}}
    (directory / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def reclaim(
    e2e_tools: Tools, control_plane: ControlPlane, upstream: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reclaim]:
    promtool, prometheus = require("promtool"), require("prometheus")
    kubectl = control_plane.kubectl
    foreign = [
        n["metadata"]["name"]
        for n in kubectl.json("get", "nodes")["items"]
        if "nvidia.com/gpu" in n["status"].get("allocatable", {})
    ]
    assert not foreign, f"another module left GPU Nodes on the session's control plane: {foreign}"
    work = tmp_path_factory.mktemp("reclaim")
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    access = _access(IdleNotebooksConfig.model_validate(CONFIG))
    with contextlib.ExitStack() as stack:
        for node, _ in CASES.values():
            slots = 2 if node == SLICED else 1
            labels = {
                "kubernetes.io/hostname": node,
                "nodepool": "gpu",
                "nvidia.com/gpu.count": "1",
                "nvidia.com/gpu.replicas": str(slots),
            }
            register_node(kubectl, node, labels, [], gpu_node_status(slots))
            stack.callback(kubectl.run, "delete", "node", node, "--ignore-not-found")
        stack.enter_context(running_notebook_controller(e2e_tools, control_plane, upstream))
        for obj in access:
            kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(obj))
            where = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
            stack.callback(
                kubectl.run, *where, "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found"
            )
        token = kubectl("-n", access[0]["metadata"]["name"], "create", "token", NAME, "--duration=2h").strip()
        # Recorded from before the pods to well after the furthest simulated pass.
        recorded = cards(now - datetime.timedelta(minutes=10), now + AHEAD + datetime.timedelta(hours=2))
        evidence = work / "evidence"
        evidence.mkdir()
        evidence_url = stack.enter_context(
            prometheus_with_cards(
                promtool, prometheus, recorded, now, now + AHEAD + datetime.timedelta(hours=2), evidence
            )
        )
        reclaim = Reclaim(control_plane, token, evidence_url, "", _stack_dir(work, evidence_url))
        server = serve_metrics(lambda: reclaim.metrics[0].text(), 0, host="127.0.0.1")
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        port = int(server.server_address[1])
        alerts = work / "alerts"
        (alerts / "data").mkdir(parents=True)
        rule = build_reclaim_alert_rules(MonitoringConfig(), IdleNotebooksConfig.model_validate(CONFIG), labels={})
        rules = alerts / "rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}), encoding="utf-8")
        reclaim.alerts_url = stack.enter_context(
            running_prometheus(prometheus, alerts / "data", alerts, alert_config(port, rules))
        )
        stack.callback(kubectl.run, "delete", "namespace", NS, QUEUE, "--ignore-not-found", "--wait=false")
        yield reclaim


@dataclass(frozen=True)
class Pool:
    reclaim: Reclaim
    at: datetime.datetime


def _running(kubectl: Kubectl) -> bool:
    pods = kubectl.json("-n", NS, "get", "pods")["items"]
    return len(pods) == len(CASES) + 1 and all(
        p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp") for p in pods
    )


def _empty(kubectl: Kubectl) -> bool:
    return not any(
        kubectl.json("-n", namespace, "get", kind)["items"]
        for namespace, kind in ((NS, "notebooks"), (NS, "statefulsets"), (NS, "pods"), (QUEUE, "pods"))
    )


@pytest.fixture
def pool(reclaim: Reclaim) -> Iterator[Pool]:
    """One Notebook per case, each pod placed on its node by the controller's StatefulSet and the scheduler, and a
    GPU pod that is no notebook sharing the sliced card: every card is held, none is free. Emptied after the test
    (the namespaces stay: deleting them waits on their finalizers for seconds)."""
    kubectl = reclaim.kubectl
    kubectl.ensure_namespace(NS)
    kubectl.ensure_namespace(QUEUE)
    try:
        for case, (node, _) in CASES.items():
            kubectl("apply", "-f", "-", stdin=json.dumps(notebook(case, node)))
        kubectl("apply", "-f", "-", stdin=json.dumps(gpu_pod(NS, "triton", SLICED)))
        eventually("every notebook's pod Running on its node", lambda: _running(kubectl), 120)
        yield Pool(reclaim, datetime.datetime.now(datetime.UTC).replace(microsecond=0) + AHEAD)
    finally:
        for pod in kubectl.json("-n", NS, "get", "pods")["items"]:
            if pod["metadata"].get("finalizers"):
                kubectl(
                    "-n",
                    NS,
                    "patch",
                    "pod",
                    pod["metadata"]["name"],
                    "--type=merge",
                    "-p",
                    '{"metadata":{"finalizers":null}}',
                )
        kubectl("-n", NS, "delete", "notebooks,statefulsets,pods,events", "--all", "--wait=false")
        kubectl("-n", QUEUE, "delete", "pods", "--all", "--wait=false")
        eventually("the pool emptied", lambda: _empty(kubectl), 120)


def decisions(judgement: Judgement) -> dict[str, tuple[Action, Reason]]:
    return {d.notebook: (d.action, d.reason) for d in judgement.decisions}


LEFT_ALONE = {
    "busy": (Action.LEAVE, Reason.BUSY),
    "kept": (Action.LEAVE, Reason.EXCLUDED),
    "lost": (Action.LEAVE, Reason.UNKNOWN_SERIES),
    "shared": (Action.LEAVE, Reason.AMBIGUOUS_CARD),
}


def test_dry_run_changes_nothing_and_reports_the_decisions_claims_reclaimable_prints(pool: Pool) -> None:
    reclaim = pool.reclaim
    reclaim.wait(QUEUE, "trial-1")
    before = {case: reclaim.notebook(case)["metadata"]["resourceVersion"] for case in CASES}
    runner = reclaim.runner(pool.at, dryRun=True)

    judged = one_pass(runner)

    assert decisions(judged) == {
        "idle": (Action.WARN, Reason.IDLE),
        "stuck": (Action.LEAVE, Reason.NOT_NEEDED),
        **LEFT_ALONE,
    }
    assert {case: reclaim.notebook(case)["metadata"]["resourceVersion"] for case in CASES} == before
    assert reclaim.events() == []
    log = runner.out
    assert isinstance(log, io.StringIO)
    logged = [
        json.loads(line.split(" decision ", 1)[1]) for line in log.getvalue().splitlines() if " decision " in line
    ]
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "claims", "--reclaimable", "--kubeconfig", str(reclaim.plane.kubeconfig), "--stack", "prod",
        "--stack-dir", str(reclaim.stack_dir), "--prometheus", reclaim.evidence_url, "--now", stamp(pool.at),
        "-o", "json",
    ]  # fmt: skip
    assert main(argv, out=out, err=err) == 0, err.getvalue()
    assert json.loads(out.getvalue())["decisions"] == logged == [decision_json(d) for d in judged.decisions]


def test_an_idle_notebook_is_stopped_while_a_gpu_pod_waits_and_the_pod_gets_its_card(pool: Pool) -> None:
    reclaim = pool.reclaim
    reclaim.wait(QUEUE, "trial-1")

    warned = one_pass(reclaim.runner(pool.at))
    stopped = one_pass(reclaim.runner(pool.at + datetime.timedelta(minutes=11)))

    assert decisions(warned)["idle"] == (Action.WARN, Reason.IDLE)
    assert decisions(stopped) == {
        "idle": (Action.STOP, Reason.IDLE),
        "stuck": (Action.LEAVE, Reason.NOT_NEEDED),
        **LEFT_ALONE,
    }
    notes = reclaim.notebook("idle")["metadata"]["annotations"]
    assert notes["kubeflow-resource-stopped"] == notes[RECLAIMED_AT] and notes[RECLAIMED_POD] == "idle-0"
    # Kubeflow's controller scales the StatefulSet to 0, the pod goes, the waiting pod is placed on the freed card.
    eventually("idle's StatefulSet at 0 replicas", lambda: reclaim.replicas("idle") == 0)
    eventually("idle-0 gone", lambda: reclaim.pod(NS, "idle-0") is None)
    placed = eventually("trial-1 placed", lambda: (reclaim.pod(QUEUE, "trial-1") or {}).get("spec", {}).get("nodeName"))
    assert placed == "gpu-idle"
    assert reclaim.events() == [("idle", "GpuReclaimWarning"), ("idle", "GpuReclaimed")]
    # Nothing else was touched.
    assert all(reclaim.replicas(case) == 1 for case in CASES if case != "idle")
    assert all(
        "kubeflow-resource-stopped" not in reclaim.notebook(c)["metadata"].get("annotations", {}) for c in LEFT_ALONE
    )


def test_with_no_gpu_pod_waiting_nothing_is_stopped(pool: Pool) -> None:
    reclaim = pool.reclaim

    judged = one_pass(reclaim.runner(pool.at, graceMinutes=0))

    assert decisions(judged) == {
        "idle": (Action.LEAVE, Reason.NOT_CONTENDED),
        "stuck": (Action.LEAVE, Reason.NOT_CONTENDED),
        **LEFT_ALONE,
    }
    assert all(reclaim.replicas(case) == 1 for case in CASES) and reclaim.events() == []


def firing(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/alerts", timeout=5) as response:
        alerts: list[dict[str, Any]] = json.loads(response.read())["data"]["alerts"]
    return [a for a in alerts if a["state"] == "firing"]


def test_a_pod_held_in_terminating_by_a_finalizer_raises_the_alert_and_blocks_a_second_stop(pool: Pool) -> None:
    reclaim = pool.reclaim
    reclaim.kubectl(
        "-n", NS, "patch", "pod", "idle-0", "--type=merge", "-p", json.dumps({"metadata": {"finalizers": [FINALIZER]}})
    )
    reclaim.wait(QUEUE, "trial-1")
    reclaim.wait(QUEUE, "trial-2")

    first = one_pass(reclaim.runner(pool.at, graceMinutes=0))
    assert decisions(first)["idle"] == (Action.STOP, Reason.IDLE)
    assert decisions(first)["stuck"] == (Action.LEAVE, Reason.CARD_NOT_BACK)
    eventually(
        "idle-0 Terminating", lambda: (reclaim.pod(NS, "idle-0") or {}).get("metadata", {}).get("deletionTimestamp")
    )

    later = one_pass(reclaim.runner(pool.at + datetime.timedelta(minutes=16), graceMinutes=0))

    (stuck,) = later.not_back
    assert (stuck.pod, stuck.terminating, stuck.finalizers, stuck.past_deadline) == ("idle-0", True, (FINALIZER,), True)
    assert decisions(later)["stuck"] == (Action.LEAVE, Reason.CARD_NOT_BACK)
    assert reclaim.replicas("stuck") == 1
    alert = eventually("GpuNotebookCardNotBack firing", lambda: firing(reclaim.alerts_url))
    assert alert[0]["labels"]["alertname"] == "GpuNotebookCardNotBack"
    assert (alert[0]["labels"]["pod"], alert[0]["labels"]["finalizers"]) == ("idle-0", FINALIZER)
    # Once the finalizer is gone, so is the pod: the card is back, and the next stop may go.
    reclaim.kubectl("-n", NS, "patch", "pod", "idle-0", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    eventually("idle-0 gone", lambda: reclaim.pod(NS, "idle-0") is None)
    eventually("trial-1 placed", lambda: (reclaim.pod(QUEUE, "trial-1") or {}).get("spec", {}).get("nodeName"))
    after = one_pass(reclaim.runner(pool.at + datetime.timedelta(minutes=17), graceMinutes=0))
    assert after.not_back == () and decisions(after)["stuck"] == (Action.STOP, Reason.IDLE)
