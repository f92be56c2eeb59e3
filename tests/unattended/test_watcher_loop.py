"""The watcher's loop (day2/repair/watcher.py) on the H200 lab: a marked node whose node-check finds Xid 79 is
repaired (hold and cordon in one conditional patch, drained by evictions, its VM alone stopped and started, back on
a new boot, node-check again, uncordoned); a fault in another domain while the first is out waits; two repairs that
do not fix open the breaker and nothing more runs; a token that holds more than its role repairs nothing.

The API server here is in memory (merge patches with the resourceVersion check, 409 on a stale one); the Proxmox
client is the wave's own (node_steps_script.Proxmox: its task and status waits run for real) over a stand-in for
its `call`; node-check's reports are walked from the lent H200's capture. The e2e run against a real kube-apiserver
with the generated RBAC is not in this file.
"""

from __future__ import annotations

import base64
import datetime
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import TURN_STATE_LABEL, WAVE_CORDON_ANNOTATION
from components.gpu_platform.health_check import pool_facts_document
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.health_condition import CONDITION
from components.stack_check import validate_stack
from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME, SECRET_NAME
from components.unattended.rbac import namespaces_of, watcher_rules
from components.unattended.watcher import watcher_zip
from components.unattended.watcher_api import WATCHER_API, Attributes, authorized, request_of, row_of
from components.unattended.watcher_facts import watcher_facts_document
from day2.node_check.facts import NodeFacts
from day2.node_check.floors import Expected, report_json, walk
from day2.repair.unattended import breaker_of
from day2.repair.watcher import Limits, Watcher, one_pass
from day2.repair.watcher_core import VERDICT_ANNOTATION, WatcherFacts
from node.kube import ApiError, Kube
from node.proxmox import Proxmox, ProxmoxFailed
from node.waiting import StepFailed
from offline.runner import read_stack_file
from tests.day2.test_repair_decision import EXAMPLES, h200, with_log, xid
from tests.node.memory_api import MemoryApi, job_status

# Python with every site package hidden: what the stock image has.
ISOLATED = (sys.executable, "-S", "-E", "-s")
DC2 = "rke2-worker-dc2-gpu-a"
DC3 = "rke2-worker-dc3-gpu-a"
HOSTS = {"4101": "rke2-worker-dc1-gpu-a", "4201": DC2, "4301": DC3}
NS = "gpu-pool-repair"
# Waits that end within a second here: a step that never gets done fails fast instead of after half an hour.
QUICK = Limits(drain=0.01, ready=0.01, node_check=0.01, smoke=0.01)
NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)
EXPECTED = Expected(
    ids=("10de:2335",), subsystems=("10de:18bf",), driver="580.159.04", proxmox_node="pve-dc2", vm_id=4201
)


class WatcherApi(MemoryApi):
    """The API server the watcher calls, in memory (tests/node/memory_api.py): every request authorized against the
    watcher's derived RBAC (403 otherwise, as the API server answers) and recorded as the authorizer sees it. A
    node-check Job completes at once on its node, its pod's log the next report queued for that node; a smoke Job
    ends as `smoke_outcome` says."""

    def __init__(self, objects: dict[str, dict[str, Any]], rbac: tuple[Any, Any]) -> None:
        super().__init__(objects=objects)
        self.rbac = rbac
        self.attributes: list[Attributes] = []
        self.jobs: list[dict[str, Any]] = []
        self.reports: dict[str, list[str]] = {}
        self.smoke_outcome = "Complete"
        self.authorize = self._authorize
        self.on_job = WatcherApi._job

    def _authorize(self, method: str, path: str) -> bool:
        request = request_of(method, path)
        self.attributes.append(request)
        return authorized(request, *self.rbac)

    @staticmethod
    def _job(api: MemoryApi, path: str, job: dict[str, Any]) -> None:
        assert isinstance(api, WatcherApi)
        meta, node = job["metadata"], job["spec"]["template"]["spec"].get("nodeName", "")
        outcome = api.smoke_outcome if meta["namespace"] == "gpu-smoke-test" else "Complete"
        job["status"] = job_status(outcome)
        pod = f"{meta['name']}-x"
        api.objects[f"/api/v1/namespaces/{meta['namespace']}/pods/{pod}"] = {
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": meta["namespace"], "labels": {"job-name": meta["name"]}},
            "spec": {"nodeName": node},
            "status": {"phase": "Succeeded"},
        }
        if meta["namespace"] == "gpu-pool-node-check":
            api.logs[f"/api/v1/namespaces/{meta['namespace']}/pods/{pod}/log"] = api.reports[node].pop(0)
        api.jobs.append(job)

    @property
    def evicted(self) -> list[str]:
        return [path.split("/")[-2] for method, path in self.requests if path.endswith("/eviction")]

    @property
    def events_reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]


class ProxmoxStandIn(Proxmox):
    """The one Proxmox client (node/proxmox.py), its `call` answered from VM states; a VM's start boots its node
    anew. A stop task ends as `stop_exit` says (qemu-server checks the lock inside the task)."""

    def __init__(self, api: WatcherApi, permissions: dict[str, dict[str, int]]) -> None:
        super().__init__("https://pve.test:8006", False)
        self.api, self.permissions = api, permissions
        self.states = {"4101": "running", "4201": "running", "4301": "running"}
        self.calls: list[tuple[str, str]] = []
        # What /cluster/resources adds to a VM's entry (a lock, an HA state), by VM id.
        self.extra: dict[str, dict[str, str]] = {}
        # What the host reports on a mapping (its `checks`), by mapping id.
        self.checks: dict[str, list[dict[str, str]]] = {}
        self.stop_exit = "OK"
        self.down = False

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        self.calls.append((method, path))
        if self.down:
            raise ProxmoxFailed("cannot reach the Proxmox API at https://pve.test:8006: [Errno 111] Connection refused")
        if path == "/access/permissions":
            return self.permissions
        if "/tasks/" in path:
            return {"status": "stopped", "exitstatus": self.stop_exit if "shutdown" in path else "OK"}
        if path == "/cluster/resources?type=vm":
            return [
                {"vmid": int(vmid), "name": HOSTS[vmid], "node": f"pve-dc{vmid[1]}", "status": state}
                | self.extra.get(vmid, {})
                for vmid, state in self.states.items()
            ]
        if path.startswith("/cluster/mapping/pci?check-node="):
            return [{"id": f"gpu-dc{n}", "checks": self.checks.get(f"gpu-dc{n}", [])} for n in (1, 2, 3)]
        vmid = path.split("/qemu/")[1].split("/")[0]
        if path.endswith("/status/current"):
            return {"status": self.states[vmid]}
        if path.endswith("/status/shutdown"):
            if self.stop_exit == "OK":
                self.states[vmid] = "stopped"
        elif path.endswith("/status/start"):
            self.states[vmid] = "running"
            node = self.api.node(HOSTS[vmid])
            node["status"]["nodeInfo"]["bootID"] = f"boot-after-{len(self.calls)}"
        return f"UPID:pve:{vmid}:{path.rsplit('/', 1)[1]}:"


class Clock:
    """The watcher's clock: NOW until a test moves it (each pass of a test that runs several is later)."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime.datetime:
        return self.now

    def later(self, minutes: int) -> None:
        self.now += datetime.timedelta(minutes=minutes)


def stack() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("h200-lab", EXAMPLES).items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})


def facts() -> WatcherFacts:
    cfg = stack()
    return WatcherFacts.from_json(
        json.loads(json.dumps(watcher_facts_document(cfg, "h200-lab", pool_facts_document(cfg, "h200-lab"))))
    )


def cluster(*marked: str, rbac: tuple[Any, Any] | None = None) -> WatcherApi:
    dump = json.loads((EXAMPLES / "h200-lab.json").read_text(encoding="utf-8"))
    objects: dict[str, dict[str, Any]] = {}
    for item in dump["items"]:
        meta = item["metadata"]
        if item["kind"] == "Node":
            path = f"/api/v1/nodes/{meta['name']}"
        else:
            plural = {"Pod": "pods", "ConfigMap": "configmaps", "Job": "jobs"}[item["kind"]]
            group = "/apis/batch/v1" if item["kind"] == "Job" else "/api/v1"
            path = f"{group}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
        objects[path] = item
    # Every node serves on the stack's pinned driver (the gate checks it, as the wave's does).
    driver = json.loads(json.dumps(pool_facts_document(stack(), "h200-lab")))["driverVersion"]
    for item in dump["items"]:
        for container in (item.get("spec") or {}).get("containers") or []:
            if container.get("name") == "nvidia-driver-ctr":
                container["image"] = f"nvcr.io/nvidia/driver:{driver}-ubuntu24.04"
    for host in marked:
        objects[f"/api/v1/nodes/{host}"]["status"]["conditions"].append(
            {"type": CONDITION, "status": "False", "reason": "NodeHealthBroken", "message": "marked"}
            | {"lastHeartbeatTime": "2026-12-05T02:50:00Z"}
        )
    # A workload on dc2 that its drain evicts.
    objects["/api/v1/namespaces/ml/pods/notebook-0"] = {
        "kind": "Pod",
        "metadata": {
            "name": "notebook-0",
            "namespace": "ml",
            "ownerReferences": [{"kind": "StatefulSet", "name": "notebook", "controller": True}],
        },
        "spec": {"nodeName": DC2},
        "status": {"phase": "Running"},
    }
    objects[f"/api/v1/namespaces/{NS}/configmaps/{BREAKER_CONFIGMAP}"] = {
        "kind": "ConfigMap",
        "metadata": {"name": BREAKER_CONFIGMAP, "namespace": NS},
        "data": {"state": "closed", "failures": "[]"},
    }
    objects[f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}"] = {
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": NS},
        "spec": {"leaseDurationSeconds": 3600},
    }
    objects[f"/api/v1/namespaces/{NS}/secrets/{SECRET_NAME}"] = {
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": NS},
        "data": {"token": base64.b64encode(b"root@pam!gpu-pool-repair=secret").decode()},
    }
    cfg = stack()
    return WatcherApi(objects, watcher_rules(cfg, TIME_SLICING_CONFIGMAP) if rbac is None else rbac)


def report(facts: NodeFacts) -> str:
    """node-check's report as the Job's pod prints it (`-o json`), walked from the lent H200's capture."""
    return json.dumps(report_json(walk(facts, EXPECTED, DC2)))


def xid_report() -> str:
    return report(with_log(xid(79))(h200()))


def healthy_report() -> str:
    return report(h200())


def watcher(
    api: WatcherApi, reports: dict[str, list[str]], extra: dict[str, dict[str, int]] | None = None
) -> tuple[Watcher, ProxmoxStandIn]:
    wf = facts()
    permissions = {path: dict.fromkeys(privileges, 0) for path, privileges in wf.allowed.items()} | (extra or {})
    proxmox = ProxmoxStandIn(api, permissions)
    proxmox.sleep = lambda _s: None
    api.reports = reports
    w = Watcher(Kube(api, sleep=lambda _s: None), wf, io.StringIO(), clock=Clock(), poll_seconds=0, limits=QUICK)
    w.connect = lambda _facts, token: proxmox
    return w, proxmox


def node_checks(api: WatcherApi) -> list[tuple[str, str]]:
    """Each node-check Job the watcher created: (its node, before or after)."""
    return [
        (j["spec"]["template"]["spec"]["nodeName"], j["metadata"]["name"].rsplit("-", 1)[1])
        for j in api.jobs
        if j["metadata"]["namespace"] == "gpu-pool-node-check"
    ]


def in_the_watchers_repair(api: WatcherApi, host: str) -> None:
    """The node out in the watcher's own repair, which another watcher process (holding the Lease, renewed now)
    is at: held, cordoned, its turn in progress."""
    lease = api.objects[f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}"]
    lease["spec"].update(holderIdentity="watcher-7d9f_1", renewTime="2026-12-05T02:59:00.000000Z")
    node = api.node(host)
    node["spec"]["unschedulable"] = True
    node["metadata"].setdefault("labels", {})[TURN_STATE_LABEL] = "repairing"
    node["metadata"].setdefault("annotations", {}).update(
        {
            "gpu-pool.dev/turn-holder": "repair:unattended@h200-lab since 2026-12-05T02:55:00Z",
            WAVE_CORDON_ANNOTATION: "repair:unattended@h200-lab",
            "gpu-pool.dev/wave-turn": "repair 2026-12-05T02:55:00Z",
        }
    )


def in_upgrade_failed(api: WatcherApi) -> WatcherApi:
    """dc2 in the operator's upgrade-failed, its driver pod on an older ControllerRevision than the DaemonSet's
    newest; deleting that pod (the DaemonSet recreates it) brings the node to upgrade-done."""
    apps = "/apis/apps/v1/namespaces/gpu-operator"
    api.objects[f"{apps}/daemonsets/nvidia-driver-daemonset"] = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator", "resourceVersion": "1"},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}}},
    }
    for revision, name in enumerate(("old0", "new1"), start=1):
        api.objects[f"{apps}/controllerrevisions/nvidia-driver-daemonset-{name}"] = {
            "kind": "ControllerRevision",
            "metadata": {
                "name": f"nvidia-driver-daemonset-{name}",
                "namespace": "gpu-operator",
                "labels": {"app": "nvidia-driver-daemonset"},
                "resourceVersion": "1",
            },
            "revision": revision,
        }
    for path, obj in list(api.objects.items()):
        on_dc2 = obj.get("kind") == "Pod" and (obj.get("spec") or {}).get("nodeName") == DC2
        if on_dc2 and (obj["metadata"].get("labels") or {}).get("app") == "nvidia-driver-daemonset":
            obj["metadata"]["labels"]["controller-revision-hash"] = "old0"
            obj["metadata"]["ownerReferences"] = [
                {"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}
            ]
            driver_pod = path
    api.node(DC2)["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    forward = api.request

    def request(method: str, path: str, body: bytes | None, content_type: str) -> Any:
        old = json.loads(json.dumps(api.objects.get(path) or {}))
        answer = forward(method, path, body, content_type)
        if method == "DELETE" and path == driver_pod:
            # The DaemonSet controller recreates it on the newest revision; the operator then moves the node on.
            old["metadata"]["labels"]["controller-revision-hash"] = "new1"
            api.objects[path + "-new"] = old | {
                "metadata": {**old["metadata"], "name": old["metadata"]["name"] + "-new"}
            }
            api.node(DC2)["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        return answer

    api.request = request  # type: ignore[method-assign]
    return api


def health_check_runs_again(api: WatcherApi, host: str, at: str, w: Watcher | None = None) -> None:
    """The health check's next run: the node's mark written anew (and the watcher's clock moved on past it)."""
    if w is not None:
        assert isinstance(w.clock, Clock)
        w.clock.later(10)
    for condition in api.node(host)["status"]["conditions"]:
        if condition["type"] == CONDITION:
            condition["lastHeartbeatTime"] = at


def reasons(api: WatcherApi) -> list[str]:
    return [e["reason"] for e in api.events]


def test_a_marked_node_with_xid_79_is_repaired_its_vm_alone_power_cycled_and_uncordoned() -> None:
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report(), healthy_report()]})
    done = one_pass(w)

    node = api.node(DC2)
    assert done == f"{DC2} repaired"
    assert [c for c in proxmox.calls if c[0] == "POST"] == [
        ("POST", "/nodes/pve-dc2/qemu/4201/status/shutdown"),
        ("POST", "/nodes/pve-dc2/qemu/4201/status/start"),
    ]
    assert node_checks(api) == [(DC2, "before"), (DC2, "after")]
    # The stack's smoke Job ran again under a name of this run, after the slots were advertised.
    (smoke,) = [j for j in api.jobs if j["metadata"]["namespace"] == "gpu-smoke-test"]
    assert smoke["metadata"]["name"].endswith("-u20261205030000")
    assert not node["spec"].get("unschedulable")
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "done"
    assert WAVE_CORDON_ANNOTATION not in node["metadata"]["annotations"]
    assert reasons(api) == ["UnattendedRepairStarted", "GpuPoolPowerCycle", "GpuPoolRepaired"]
    records = json.loads(node["metadata"]["annotations"]["gpu-pool.dev/repairs"])
    assert [r["event"] for r in records] == ["power-cycle", "repaired"]
    # The drain evicted by kubectl drain's rules: the workload and the pods that had ended, not the operator's
    # DaemonSet pods.
    assert "notebook-0" in api.evicted
    assert not [name for name in api.evicted if name.startswith("nvidia-")]
    assert (
        api.objects[f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}"]["spec"].get("holderIdentity")
        is None
    )


def test_a_fault_in_another_domain_while_the_first_is_out_waits() -> None:
    api = cluster(DC2, DC3)
    in_the_watchers_repair(api, DC2)
    w, proxmox = watcher(api, {DC2: [xid_report()], DC3: [xid_report()]})

    done = one_pass(w)

    assert done == "nothing to repair"
    assert not [c for c in proxmox.calls if c[0] == "POST"]
    assert node_checks(api) == []  # no node-check Job while a guard rail that needs none refuses
    assert "AnotherDomainOut" in reasons(api)
    assert "AnotherDomainOut" in api.node(DC3)["metadata"]["annotations"][VERDICT_ANNOTATION]


def test_the_same_refusal_is_recorded_once_not_every_pass() -> None:
    api = cluster(DC2, DC3)
    in_the_watchers_repair(api, DC2)
    w, _ = watcher(api, {})

    one_pass(w)
    one_pass(w)

    assert reasons(api) == ["AnotherDomainOut"]


def test_two_repairs_that_do_not_fix_open_the_breaker_and_nothing_more_runs() -> None:
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report(), xid_report(), xid_report(), xid_report()]})

    assert one_pass(w).startswith(f"{DC2} stopped: the power cycle did not fix it")
    # A person brings dc2 back as it is (uncordoned, hold released), and the health check marks it again.
    node = api.node(DC2)
    health_check_runs_again(api, DC2, "2026-12-05T03:00:00Z", w)
    node["spec"].pop("unschedulable", None)
    node["metadata"]["labels"][TURN_STATE_LABEL] = "done"
    node["metadata"]["annotations"].pop("gpu-pool.dev/turn-holder")
    node["metadata"]["annotations"].pop(WAVE_CORDON_ANNOTATION, None)
    node["metadata"]["annotations"].pop("gpu-pool.dev/wave-turn", None)
    assert one_pass(w).startswith(f"{DC2} stopped")
    stops = len([c for c in proxmox.calls if c[1].endswith("/status/shutdown")])

    breaker = breaker_of(api.objects[f"/api/v1/namespaces/{NS}/configmaps/{BREAKER_CONFIGMAP}"]["data"])
    node = api.node(DC2)
    node["spec"].pop("unschedulable", None)
    node["metadata"]["labels"][TURN_STATE_LABEL] = "done"
    node["metadata"]["annotations"].pop("gpu-pool.dev/turn-holder")
    health_check_runs_again(api, DC2, "2026-12-05T03:10:00Z", w)
    third = one_pass(w)

    assert breaker.open and len(breaker.failures) == 2
    assert "UnattendedBreakerOpened" in reasons(api)
    assert third == "nothing to repair"
    assert "BreakerOpen" in api.node(DC2)["metadata"]["annotations"][VERDICT_ANNOTATION]
    assert len([c for c in proxmox.calls if c[1].endswith("/status/shutdown")]) == stops == 2
    # A repair that did not fix leaves its node cordoned under the watcher's hold, state stopped.
    assert api.node(DC2)["metadata"]["annotations"]["gpu-pool.dev/repairs"].count('"stopped"') == 2


def test_a_token_that_holds_more_than_its_role_repairs_nothing() -> None:
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report()]}, extra={"/": {"Sys.Audit": 0}, "/vms": {"VM.PowerMgmt": 1}})

    done = one_pass(w)

    assert done.startswith(f"{DC2}: the repair token holds more than its role")
    assert [c for c in proxmox.calls if c[0] == "POST"] == []
    assert not api.node(DC2)["spec"].get("unschedulable")
    assert w.metrics.refusals == {(DC2, "TokenBeyondRole"): 1}
    event = next(e for e in api.events if e["reason"] == "TokenBeyondRole")
    assert "Sys.Audit on /" in event["message"] and "VM.PowerMgmt on /vms propagated" in event["message"]


def test_a_node_a_person_holds_is_not_touched() -> None:
    api = cluster(DC2)
    node = api.node(DC2)
    node["metadata"].setdefault("labels", {})[TURN_STATE_LABEL] = "repairing"
    node["metadata"].setdefault("annotations", {})["gpu-pool.dev/turn-holder"] = "repair:ana@laptop since x"
    w, proxmox = watcher(api, {DC2: [xid_report()]})

    assert one_pass(w) == "nothing to repair"
    assert not proxmox.calls and not node_checks(api)
    assert "NodeHeld" in reasons(api)


def test_the_packed_watcher_runs_with_every_site_package_hidden(tmp_path: Path) -> None:
    """The zip the Deployment runs imports nothing beyond the standard library: with no API server to reach, one
    pass fails as a pass (exit 1, the error logged), not as an ImportError."""
    cfg = stack()
    document = watcher_facts_document(cfg, "h200-lab", pool_facts_document(cfg, "h200-lab"))
    (tmp_path / "facts.json").write_text(json.dumps(document), encoding="utf-8")
    (tmp_path / "watcher.pyz").write_bytes(watcher_zip())

    done = subprocess.run(
        [
            *ISOLATED,
            "watcher.pyz",
            "--facts",
            "facts.json",
            "--server",
            "http://127.0.0.1:9",
            "--once",
            "--metrics-port",
            "0",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 1, done.stderr
    assert "pass failed: GET /api/v1/nodes/" in done.stdout and "no answer from the API server" in done.stdout


@pytest.mark.parametrize("bad", ["{}", "not json"])
def test_unreadable_facts_are_exit_2_naming_the_file(tmp_path: Path, bad: str) -> None:
    from day2.repair.watcher import main

    (tmp_path / "facts.json").write_text(bad, encoding="utf-8")
    out = io.StringIO()

    assert main(["--facts", str(tmp_path / "facts.json"), "--once"], out=out) == 2
    assert f"--facts {tmp_path / 'facts.json'}" in out.getvalue()


def test_the_node_check_flags_are_the_ones_gpu_pool_repair_gives_node_check() -> None:
    from components.unattended.node_check_job import node_check_flags
    from day2.node_stack import as_flags, expected_of

    cfg = stack()
    for domain in cfg.failure_domains:
        assert node_check_flags(cfg, domain) == as_flags(expected_of(cfg, domain))


def test_every_request_of_the_watcher_is_a_row_of_its_api_table_and_every_row_is_used() -> None:
    """The Roles are derived from WATCHER_API: a request outside it is refused by the Roles (and a row no step uses
    would grant too much). A repair that fixes and one that does not use every row between them."""
    namespaces = namespaces_of(stack())
    fixed = cluster(DC2)
    one_pass(watcher(fixed, {DC2: [xid_report(), healthy_report()]})[0])
    not_fixed = cluster(DC2)
    one_pass(watcher(not_fixed, {DC2: [xid_report(), xid_report()]})[0])

    # After the power cycle the operator's upgrade failed on dc2 with its driver pod on an older revision: the gate
    # (the wave's) replaces that pod.
    upgrade = in_upgrade_failed(cluster(DC2))
    assert one_pass(watcher(upgrade, {DC2: [xid_report(), healthy_report()]})[0]) == f"{DC2} repaired"

    made = [*fixed.attributes, *not_fixed.attributes, *upgrade.attributes]
    rows = {row_of(request, namespaces) for request in made}
    assert None not in rows, [r for r in made if row_of(r, namespaces) is None]
    table = {row for step in WATCHER_API.values() for row in step}
    assert rows == table, f"rows no step used: {table - rows}"


@pytest.mark.parametrize(
    ("resource", "verb"), [("pods/eviction", "create"), ("nodes", "patch"), ("jobs", "create"), ("pods/log", "get")]
)
def test_a_step_whose_verb_the_roles_lack_repairs_nothing(resource: str, verb: str) -> None:
    """The same loop with one grant taken out of the derived Roles: the API server's 403 stops it."""
    cluster_rules, spaced = watcher_rules(stack(), TIME_SLICING_CONFIGMAP)

    def without(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = []
        for rule in rules:
            verbs = [v for v in rule["verbs"] if not (resource in rule["resources"] and v == verb)]
            if verbs:
                kept.append({**rule, "verbs": verbs})
        return kept

    api = cluster(DC2, rbac=(without(cluster_rules), {ns: without(r) for ns, r in spaced.items()}))
    w, _ = watcher(api, {DC2: [xid_report(), healthy_report()]})

    try:
        done = one_pass(w)
    except (ApiError, StepFailed) as error:
        done = str(error)

    assert "403 Forbidden" in done or "403 Forbidden" in w.out.getvalue()  # type: ignore[attr-defined]
    assert api.node(DC2)["metadata"].get("labels", {}).get(TURN_STATE_LABEL) != "done"


@pytest.mark.parametrize(
    ("lock", "checks", "said"),
    [
        ({"lock": "backup"}, [], "is locked (backup)"),
        ({"hastate": "started"}, [], "is HA-managed (started)"),
        ({}, [{"severity": "error", "message": "device 0000:41:00.0 not found"}], "device 0000:41:00.0 not found"),
    ],
)
def test_what_proxmox_says_against_a_power_cycle_stops_it_before_anything_changes(
    lock: dict[str, str], checks: list[dict[str, str]], said: str
) -> None:
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report()]})
    proxmox.extra["4201"] = lock
    proxmox.checks["gpu-dc2"] = checks

    done = one_pass(w)

    assert said in done
    assert [c for c in proxmox.calls if c[0] == "POST"] == []
    assert not api.node(DC2)["spec"].get("unschedulable") and api.evicted == []
    assert "HostRefuses" in reasons(api)


def test_the_metrics_count_repairs_by_result_refusals_by_reason_and_show_the_breaker() -> None:
    fixed = cluster(DC2)
    w, _ = watcher(fixed, {DC2: [xid_report(), xid_report()]})
    one_pass(w)
    opened = cluster(DC2)
    breaker = opened.objects[f"/api/v1/namespaces/{NS}/configmaps/{BREAKER_CONFIGMAP}"]
    breaker["data"] = {"state": "open", "failures": "[]", "openedAt": "2026-12-05T01:00:00Z"}
    refused, _ = watcher(opened, {})
    one_pass(refused)

    assert f'gpu_pool_unattended_repairs_total{{node="{DC2}",result="not-fixed"}} 1' in w.metrics.text()
    assert "gpu_pool_unattended_breaker_open 0" in w.metrics.text()
    assert f'gpu_pool_unattended_refusals_total{{node="{DC2}",reason="BreakerOpen"}} 1' in refused.metrics.text()
    assert "gpu_pool_unattended_breaker_open 1" in refused.metrics.text()


def test_a_smoke_test_that_fails_after_the_power_cycle_is_a_repair_that_did_not_fix() -> None:
    api = cluster(DC2)
    api.smoke_outcome = "Failed"
    w, _ = watcher(api, {DC2: [xid_report(), healthy_report()]})

    done = one_pass(w)

    assert done.startswith(f"{DC2} stopped: the power cycle did not fix it: the smoke test gpu-smoke-test/")
    assert api.node(DC2)["spec"]["unschedulable"] is True
    breaker = breaker_of(api.objects[f"/api/v1/namespaces/{NS}/configmaps/{BREAKER_CONFIGMAP}"]["data"])
    assert len(breaker.failures) == 1 and not breaker.open


def test_a_mark_judged_with_node_check_is_not_judged_again_until_the_health_check_runs_again() -> None:
    """A fault the watcher may not repair (here: the card is fine by node-check, the mark is a driver matter)
    costs one node-check Job per health-check run, not one per pass."""
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [healthy_report(), healthy_report()]})

    one_pass(w)
    one_pass(w)
    one_pass(w)
    judged_once = node_checks(api)
    health_check_runs_again(api, DC2, "2026-12-05T03:00:00Z", w)
    one_pass(w)

    assert judged_once == [(DC2, "before")]
    assert node_checks(api) == [(DC2, "before"), (DC2, "before")]
    assert [c for c in proxmox.calls if c[0] == "POST"] == []
