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
import copy
import datetime
import io
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.node_steps_script import Proxmox
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
from day2.doctor.health_check import ApiError
from day2.node_check.facts import NodeFacts
from day2.node_check.floors import Expected, report_json, walk
from day2.repair.unattended import breaker_of
from day2.repair.watcher import Conflict, Kube, Watcher, one_pass
from day2.repair.watcher_core import VERDICT_ANNOTATION, WatcherFacts
from offline.runner import read_stack_file
from tests.day2.test_repair_decision import EXAMPLES, h200, with_log, xid

# Python with every site package hidden: what the stock image has.
ISOLATED = (sys.executable, "-S", "-E", "-s")
DC2 = "rke2-worker-dc2-gpu-a"
DC3 = "rke2-worker-dc3-gpu-a"
HOSTS = {"4101": "rke2-worker-dc1-gpu-a", "4201": DC2, "4301": DC3}
NS = "gpu-pool-repair"
NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)
EXPECTED = Expected(
    ids=("10de:2335",), subsystems=("10de:18bf",), driver="580.159.04", proxmox_node="pve-dc2", vm_id=4201
)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class MemoryApi(Kube):
    """What the watcher calls of the API server, in memory: objects by path, a resourceVersion each; every request
    authorized against the watcher's derived RBAC (403 otherwise, as the API server answers) and recorded. A
    node-check Job completes at once on its node, its pod's log the next report queued for that node."""

    def __init__(self, objects: dict[str, dict[str, Any]], rbac: tuple[Any, Any]) -> None:
        super().__init__("https://memory", "token", None)
        self.objects = objects
        self.rbac = rbac
        self.version = 1
        self.events: list[dict[str, Any]] = []
        self.jobs: list[dict[str, Any]] = []
        self.evicted: list[str] = []
        self.requests: list[Attributes] = []
        self.reports: dict[str, list[str]] = {}
        self.logs: dict[str, str] = {}
        # How the smoke Jobs end (the Job controller's condition).
        self.smoke_outcome = "Complete"
        for obj in objects.values():
            obj.setdefault("metadata", {})["resourceVersion"] = "1"

    def _authorize(self, method: str, path: str) -> None:
        request = request_of(method, path)
        self.requests.append(request)
        if not authorized(request, *self.rbac):
            raise ApiError(f"{method} {path}: 403 Forbidden: {request} is not in the watcher's Roles")

    def _job(self, job: dict[str, Any]) -> dict[str, Any]:
        meta, node = job["metadata"], job["spec"]["template"]["spec"].get("nodeName", "")
        outcome = self.smoke_outcome if meta["namespace"] == "gpu-smoke-test" else "Complete"
        job["status"] = {"conditions": [{"type": outcome, "status": "True"}]}
        self.objects[f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}"] = job
        pod = f"{meta['name']}-x"
        self.objects[f"/api/v1/namespaces/{meta['namespace']}/pods/{pod}"] = {
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": meta["namespace"], "labels": {"job-name": meta["name"]}},
            "spec": {"nodeName": node},
            "status": {"phase": "Succeeded"},
        }
        if meta["namespace"] == "gpu-pool-node-check":
            self.logs[f"/api/v1/namespaces/{meta['namespace']}/pods/{pod}/log"] = self.reports[node].pop(0)
        self.jobs.append(job)
        return job

    def text(self, path: str) -> str:
        self._authorize("GET", path)
        return self.logs[path]

    def _bump(self, path: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    def send(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        self._authorize(method, path)
        if method == "GET":
            return copy.deepcopy(self.objects.get(path))
        if method == "POST" and path.endswith("/events"):
            self.events.append(body)
            return body
        if method == "POST" and path.endswith("/jobs"):
            return self._job(copy.deepcopy(body))
        if method == "POST" and path.endswith("/eviction"):
            pod = path.removesuffix("/eviction")
            self.evicted.append(path.split("/")[-2])
            self.objects.pop(pod, None)
            return {}
        current = self.objects.get(path)
        if current is None:
            raise ApiError(f"{method} {path}: 404 Not Found")
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent is not None and sent != current["metadata"]["resourceVersion"]:
            raise Conflict(f"{method} {path}: 409 Conflict: the object has been modified")
        self._bump(path, merge(current, body) if method == "PATCH" else copy.deepcopy(body))
        return copy.deepcopy(self.objects[path])

    def items(self, path: str, kind: str) -> list[dict[str, Any]]:
        self._authorize("GET", path)
        base, _, query = path.partition("?")
        found = [copy.deepcopy(o) for p, o in sorted(self.objects.items()) if o.get("kind") == kind]
        if base.startswith("/api/v1/namespaces/") or base.startswith("/apis/batch/v1/namespaces/"):
            namespace = base.split("/namespaces/")[1].split("/")[0]
            found = [o for o in found if o["metadata"].get("namespace") == namespace]
        query_args = dict(urllib.parse.parse_qsl(query))
        wanted = query_args.get("fieldSelector", "")
        if wanted.startswith("spec.nodeName="):
            found = [o for o in found if (o.get("spec") or {}).get("nodeName") == wanted.split("=", 1)[1]]
        label = query_args.get("labelSelector", "")
        if label:
            key, value = label.split("=", 1)
            found = [o for o in found if (o["metadata"].get("labels") or {}).get(key) == value]
        return found

    def node(self, name: str) -> dict[str, Any]:
        return self.objects[f"/api/v1/nodes/{name}"]


class ProxmoxStandIn(Proxmox):
    """The wave's Proxmox client, its `call` answered from VM states; a VM's start boots its node anew."""

    def __init__(self, api: MemoryApi, permissions: dict[str, dict[str, int]]) -> None:
        super().__init__("https://pve.test:8006", False)
        self.api, self.permissions = api, permissions
        self.states = {"4101": "running", "4201": "running", "4301": "running"}
        self.calls: list[tuple[str, str]] = []
        # What /cluster/resources adds to a VM's entry (a lock, an HA state), by VM id.
        self.extra: dict[str, dict[str, str]] = {}
        # What the host reports on a mapping (its `checks`), by mapping id.
        self.checks: dict[str, list[dict[str, str]]] = {}

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        self.calls.append((method, path))
        if path == "/access/permissions":
            return self.permissions
        if "/tasks/" in path:
            return {"status": "stopped", "exitstatus": "OK"}
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
            self.states[vmid] = "stopped"
        elif path.endswith("/status/start"):
            self.states[vmid] = "running"
            node = self.api.node(HOSTS[vmid])
            node["status"]["nodeInfo"]["bootID"] = f"boot-after-{len(self.calls)}"
        return f"UPID:pve:{vmid}:{path.rsplit('/', 1)[1]}:"


def stack() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("h200-lab", EXAMPLES).items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})


def facts() -> WatcherFacts:
    cfg = stack()
    return WatcherFacts.from_json(
        json.loads(json.dumps(watcher_facts_document(cfg, "h200-lab", pool_facts_document(cfg, "h200-lab"))))
    )


def cluster(*marked: str, rbac: tuple[Any, Any] | None = None) -> MemoryApi:
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
    for host in marked:
        objects[f"/api/v1/nodes/{host}"]["status"]["conditions"].append(
            {"type": CONDITION, "status": "False", "reason": "NodeHealthBroken", "message": "marked"}
            | {"lastHeartbeatTime": "2026-12-05T02:50:00Z"}
        )
    # A workload on dc2 that its drain evicts.
    objects["/api/v1/namespaces/ml/pods/notebook-0"] = {
        "kind": "Pod",
        "metadata": {"name": "notebook-0", "namespace": "ml", "ownerReferences": [{"kind": "StatefulSet"}]},
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
    return MemoryApi(objects, watcher_rules(cfg, TIME_SLICING_CONFIGMAP) if rbac is None else rbac)


def report(facts: NodeFacts) -> str:
    """node-check's report as the Job's pod prints it (`-o json`), walked from the lent H200's capture."""
    return json.dumps(report_json(walk(facts, EXPECTED, DC2)))


def xid_report() -> str:
    return report(with_log(xid(79))(h200()))


def healthy_report() -> str:
    return report(h200())


def watcher(
    api: MemoryApi, reports: dict[str, list[str]], extra: dict[str, dict[str, int]] | None = None
) -> tuple[Watcher, ProxmoxStandIn]:
    wf = facts()
    permissions = {path: dict.fromkeys(privileges, 0) for path, privileges in wf.allowed.items()} | (extra or {})
    proxmox = ProxmoxStandIn(api, permissions)
    api.reports = reports
    w = Watcher(api, wf, io.StringIO(), clock=lambda: NOW, poll_seconds=0)
    w.connect = lambda _facts, token: proxmox
    return w, proxmox


def node_checks(api: MemoryApi) -> list[tuple[str, str]]:
    """Each node-check Job the watcher created: (its node, before or after)."""
    return [
        (j["spec"]["template"]["spec"]["nodeName"], j["metadata"]["name"].rsplit("-", 1)[1])
        for j in api.jobs
        if j["metadata"]["namespace"] == "gpu-pool-node-check"
    ]


def in_the_watchers_repair(api: MemoryApi, host: str) -> None:
    """The node out in the watcher's own repair: held, cordoned, its turn in progress."""
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


def health_check_runs_again(api: MemoryApi, host: str, at: str) -> None:
    """The health check's next run: the node's mark written anew."""
    for condition in api.node(host)["status"]["conditions"]:
        if condition["type"] == CONDITION:
            condition["lastHeartbeatTime"] = at


def reasons(api: MemoryApi) -> list[str]:
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
    # The drain evicted the workload alone: not the operator's DaemonSet pods, not the smoke pod that had ended.
    assert api.evicted == ["notebook-0"]
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
    health_check_runs_again(api, DC2, "2026-12-05T03:00:00Z")
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
    health_check_runs_again(api, DC2, "2026-12-05T03:10:00Z")
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

    assert done == "token beyond its role: no repair"
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
    assert "pass failed: GET /api/v1/namespaces/gpu-pool-repair/configmaps/gpu-pool-repair-breaker" in done.stdout


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

    made = [*fixed.requests, *not_fixed.requests]
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
    except ApiError as error:
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
    health_check_runs_again(api, DC2, "2026-12-05T03:00:00Z")
    one_pass(w)

    assert judged_once == [(DC2, "before")]
    assert node_checks(api) == [(DC2, "before"), (DC2, "before")]
    assert [c for c in proxmox.calls if c[0] == "POST"] == []
