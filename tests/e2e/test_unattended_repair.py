"""The unattended repair's watcher (day2/repair/watcher.py) against the e2e control plane (tests/e2e/test_repair.py's
lab: three VMs in the Proxmox stand-in, their Nodes registered by the cluster stand-in and kept Ready by KWOK, the
operator's driver and device-plugin pods on each).

The watcher runs its passes in this process against the real kube-apiserver, as its ServiceAccount: the token is a
TokenRequest for the ServiceAccount bound to exactly the RBAC the stack generates (components/unattended), so a
request its Roles lack is the API server's 403. Its node-check Jobs are created, placed on the marked node and
completed (KWOK, the Job controller); KWOK runs no container, so the report a Job's pod would print is the saved
node-check report of dc2 (examples/day2/), handed over once the API server confirms the watcher may read that pod's
log (a SubjectAccessReview as the ServiceAccount: `kubectl auth can-i --as`). Proxmox is the stand-in, holding the
repair token to exactly the stack's credential plan and every endpoint to its upstream permission check
(tests/e2e/proxmox_permissions.py, from knowledge/proxmox_access.py).
"""

from __future__ import annotations

import base64
import datetime
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.observed import TURN_HOLDER_ANNOTATION, TURN_STATE_LABEL
from components.gpu_platform.health_check import pool_facts_document
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.health_condition import CONDITION
from components.stack_check import validate_stack
from components.unattended.credential import TOKEN_SECRET_KEY, credential_plan
from components.unattended.node_check_job import node_check_namespace
from components.unattended.objects import BREAKER_CONFIGMAP, NAME, SECRET_NAME, build_watcher_access, build_watcher_rbac
from components.unattended.rbac import watcher_rules
from components.unattended.watcher_facts import watcher_facts_document
from config.stack import StackConfig
from day2.repair.unattended import breaker_of
from day2.repair.watcher import Watcher, one_pass
from day2.repair.watcher_core import VERDICT_ANNOTATION, WatcherFacts
from node.kube import ApiError, Kube, Rest
from offline.runner import PROJECT
from tests.e2e.control_plane import ControlPlane, eventually

# With test_repair's lab fixtures (kubectl, lab, namespaces), used here by name.
from tests.e2e.test_repair import DC2, HEALTHY_REPORT, XID_REPORT, Lab, kubectl, lab, namespaces  # noqa: F401

DC1 = "rke2-worker-dc1-gpu-a"
REPAIR_TOKEN = "pulumi@pve!gpu-pool-repair-prod-g1"
REPAIR_SECRET = "5e1ec7ed-0000-4000-8000-00000000beef"
# The breaker's test power-cycles dc2 three times: the daily budget is not what it is about.
REPAIR = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}, "maxPerDay": 3}


class CheckedLogs(Kube):
    """The watcher's API client; a pod's log (which KWOK cannot serve) is the next saved report for the Job's node,
    handed over only where the API server's own authorizer lets the watcher read it."""

    def __init__(self, server: str, token: str, ca: str, pool: Lab, subject: str, reports: dict[str, list[Path]]):
        super().__init__(Rest(server, token, ca), component="gpu-pool-repair-watcher")
        self.lab, self.subject, self.reports = pool, subject, reports

    def text(self, path: str) -> str:
        parts = path.strip("/").split("/")
        namespace, pod = parts[3], parts[5]
        allowed = self.lab.kubectl.run(
            "auth", "can-i", "get", "pods", "--subresource=log", "-n", namespace, "--as", self.subject
        )
        if allowed.stdout.strip() != "yes":
            raise ApiError(f"GET {path}: 403 Forbidden (pods/log in {namespace})")
        node = self.lab.kubectl.json("-n", namespace, "get", "pod", pod)["spec"]["nodeName"]
        return self.reports[node].pop(0).read_text(encoding="utf-8")


@dataclass
class Unattended:
    lab: Lab
    stack: StackConfig
    facts: WatcherFacts
    token: str
    server: str
    ca: str
    reports: dict[str, list[Path]] = field(default_factory=dict)
    marks: int = 0

    def watcher(self) -> Watcher:
        subject = f"system:serviceaccount:{self.stack.repair.unattended.namespace}:{NAME}"
        kube = CheckedLogs(self.server, self.token, self.ca, self.lab, subject, self.reports)
        return Watcher(kube, self.facts, io.StringIO(), poll_seconds=0.2)

    def mark(self, host: str) -> None:
        """What the health check writes on a node whose floor it finds broken, each run at a heartbeat of its own
        (the watcher judges each mark once)."""
        self.marks += 1
        at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=self.marks)
        now = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {"type": CONDITION, "status": "False", "reason": "DriverPodBroken", "message": "marked"}
        patch = {"status": {"conditions": [condition | {"lastHeartbeatTime": now, "lastTransitionTime": now}]}}
        self.lab.kubectl("patch", "node", host, "--subresource=status", "-p", json.dumps(patch))

    def release(self, host: str) -> None:
        """A person takes a stopped node back as it is (what `pulumi up` or a person's repair ends with)."""
        self.lab.kubectl("uncordon", host)
        self.lab.kubectl("label", "node", host, f"{TURN_STATE_LABEL}=done", "--overwrite")
        self.lab.kubectl("annotate", "node", host, f"{TURN_HOLDER_ANNOTATION}-", "gpu-pool.dev/wave-turn-")

    def events(self, host: str) -> list[str]:
        found = self.lab.kubectl.json(
            "-n", "default", "get", "events", "--field-selector", f"involvedObject.name={host}"
        )
        return sorted(e["reason"] for e in found["items"] if e["source"].get("component") == "gpu-pool-repair-watcher")

    def breaker(self) -> Any:
        namespace = self.stack.repair.unattended.namespace
        return breaker_of(self.lab.kubectl.json("-n", namespace, "get", "configmap", BREAKER_CONFIGMAP)["data"])


def _objects(stack: StackConfig) -> list[dict[str, Any]]:
    cfg = stack.repair.unattended
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": cfg.namespace},
        "data": {TOKEN_SECRET_KEY: base64.b64encode(f"{REPAIR_TOKEN}={REPAIR_SECRET}".encode()).decode()},
    }
    access = build_watcher_access(cfg)
    rbac = build_watcher_rbac(cfg, *watcher_rules(stack, TIME_SLICING_CONFIGMAP))
    return [access[0], node_check_namespace(cfg), *access[1:], *rbac, secret]


@pytest.fixture
def unattended(lab: Lab, control_plane: ControlPlane) -> Iterator[Unattended]:  # noqa: F811
    """The lab with what `repair.unattended.enabled` registers: the watcher's namespace, ServiceAccount, breaker and
    Lease, the node-check namespace, the derived RBAC and the token's Secret; the token in the Proxmox stand-in
    with exactly the plan's ACLs, and the PCI mappings the stack's `up` creates."""
    raw = yaml.safe_load((lab.stack_dir / "Pulumi.prod.yaml").read_text(encoding="utf-8"))["config"]
    raw[f"{PROJECT}:repair"] = REPAIR
    stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in raw.items()})
    plan = credential_plan(stack, "prod")
    roles = {role.role_id: role for role in plan.roles}
    acl: dict[str, dict[str, int]] = {}
    for row in plan.acls:
        acl.setdefault(row.path, {}).update(dict.fromkeys(roles[row.role_id].privileges, 0))
        if row.path.startswith("/mapping/pci/"):
            name = row.path.removeprefix("/mapping/pci/")
            lab.pve.state.mappings[name] = {"id": name, "type": "pci", "map": []}
    lab.pve.state.token_acls[f"{REPAIR_TOKEN}={REPAIR_SECRET}"] = acl
    objects = _objects(stack)
    cfg = stack.repair.unattended
    try:
        # One apply of them all, in their order (a kubectl each was most of this module's own calls).
        every = {"apiVersion": "v1", "kind": "List", "items": objects}
        lab.kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(every))
        token = lab.kubectl("-n", cfg.namespace, "create", "token", NAME).strip()
        facts = WatcherFacts.from_json(
            json.loads(json.dumps(watcher_facts_document(stack, "prod", pool_facts_document(stack, "prod"))))
        )
        yield Unattended(lab, stack, facts, token, control_plane.cluster.url, str(control_plane.work / "ca.crt"))
    finally:
        lab.kubectl.run("delete", "namespace", cfg.namespace, cfg.node_check_namespace, "--ignore-not-found",
                        "--wait=true", "--timeout=120s")  # fmt: skip
        for obj in objects:
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding") or (
                obj["kind"] in ("Role", "RoleBinding") and obj["metadata"]["namespace"] not in (cfg.namespace,)
            ):
                where = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
                lab.kubectl.run(*where, "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
        lab.kubectl.run("-n", "default", "delete", "events", "--field-selector", "source=gpu-pool-repair-watcher")


def test_a_marked_node_whose_card_fell_off_the_bus_is_repaired_unattended_end_to_end(unattended: Unattended) -> None:
    pool = unattended.lab
    unattended.mark(DC2)
    unattended.reports[DC2] = [XID_REPORT, HEALTHY_REPORT]

    done = one_pass(unattended.watcher())

    assert done == f"{DC2} repaired", done
    # Proxmox: only dc2's VM, shut down then started, every call within the token's role.
    assert pool.vm_calls(4201) == ["POST status/shutdown", "POST status/start"]
    assert pool.vm_calls(4101) == pool.vm_calls(4301) == []
    assert pool.pve.state.refused == [] and pool.pve.unanswered() == []
    node = pool.node()
    assert node["status"]["nodeInfo"]["bootID"] == "dc2-boot-2"
    assert not node["spec"].get("unschedulable")
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "done"
    assert [r["event"] for r in pool.records()] == ["power-cycle", "repaired"]
    assert unattended.events(DC2) == ["GpuPoolPowerCycle", "GpuPoolRepaired", "UnattendedRepairStarted"]
    # node-check ran twice as a Job pinned to dc2, each completed.
    checks = unattended.stack.repair.unattended.node_check_namespace
    jobs = pool.kubectl.json("-n", checks, "get", "jobs")["items"]
    assert sorted(j["metadata"]["name"].rsplit("-", 1)[1] for j in jobs) == ["after", "before"]
    assert {j["spec"]["template"]["spec"]["nodeName"] for j in jobs} == {DC2}
    assert all(any(c["type"] == "Complete" for c in j["status"]["conditions"]) for j in jobs)
    # The smoke test ran again under a name of this run, placed on dc2 by kube-scheduler and completed.
    smoke = unattended.stack.smoke_test.namespace
    (job,) = [j for j in pool.kubectl.json("-n", smoke, "get", "jobs")["items"] if "-u20" in j["metadata"]["name"]]
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    (pod,) = pool.kubectl.json("-n", smoke, "get", "pods", "-l", f"job-name={job['metadata']['name']}")["items"]
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == (DC2, "Succeeded")
    for other in (DC1, "rke2-worker-dc3-gpu-a"):
        assert not pool.node(other)["spec"].get("unschedulable")


def test_repairs_that_do_not_fix_keep_other_domains_waiting_and_open_the_breaker_until_a_person_resets_it(
    unattended: Unattended,
) -> None:
    pool = unattended.lab
    unattended.mark(DC2)
    unattended.reports[DC2] = [XID_REPORT, XID_REPORT]

    first = one_pass(unattended.watcher())

    assert first.startswith(f"{DC2} stopped: the power cycle did not fix it"), first
    assert pool.node()["spec"].get("unschedulable") is True
    # A fault in another domain while dc2 is out waits: no node-check, no Proxmox call for it.
    unattended.mark(DC1)
    assert one_pass(unattended.watcher()) == "nothing to repair"
    assert pool.vm_calls(4101) == []
    assert "AnotherDomainOut" in pool.node(DC1)["metadata"]["annotations"][VERDICT_ANNOTATION]
    # dc1's fault is cleared; dc2 is taken back as it is, faults again, and the second repair does not fix either.
    pool.kubectl("patch", "node", DC1, "--subresource=status", "-p", json.dumps(_healthy_condition()))
    unattended.release(DC2)
    unattended.mark(DC2)
    unattended.reports[DC2] = [XID_REPORT, XID_REPORT]
    assert one_pass(unattended.watcher()).startswith(f"{DC2} stopped")
    breaker = unattended.breaker()
    assert breaker.open and [f.node for f in breaker.failures] == [DC2, DC2]
    assert "UnattendedBreakerOpened" in unattended.events(DC2)
    # Nothing more runs while it is open.
    unattended.release(DC2)
    unattended.mark(DC2)
    unattended.reports[DC2] = [XID_REPORT, HEALTHY_REPORT]
    assert one_pass(unattended.watcher()) == "nothing to repair"
    assert pool.vm_calls(4201) == ["POST status/shutdown", "POST status/start"] * 2
    assert "BreakerOpen" in pool.node()["metadata"]["annotations"][VERDICT_ANNOTATION]
    # A person closes it (recorded with who and when); the next pass repairs.
    from tests.day2.cli_helpers import run

    reset = run("repair", "--reset-breaker", "--stack", "prod", "--stack-dir", str(_stack_dir(unattended)))
    assert reset.code == 0, reset.err
    assert "was open since" in reset.out
    assert one_pass(unattended.watcher()) == f"{DC2} repaired"
    assert not unattended.breaker().open and unattended.breaker().reset_by
    assert pool.pve.state.refused == []


def _healthy_condition() -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": CONDITION, "status": "True", "reason": "AllFloorsOk", "message": "ok"}
    return {"status": {"conditions": [condition | {"lastHeartbeatTime": now, "lastTransitionTime": now}]}}


def _stack_dir(unattended: Unattended) -> Path:
    """The lab's stack file with repair.unattended on, for `gpu-pool repair --reset-breaker`."""
    folder = unattended.lab.stack_dir.parent / "unattended-stack"
    folder.mkdir(exist_ok=True)
    raw = yaml.safe_load((unattended.lab.stack_dir / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    raw["config"][f"{PROJECT}:repair"] = REPAIR
    (folder / "Pulumi.prod.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return folder


def test_the_stand_in_refuses_the_repair_token_anything_its_table_does_not_grant(unattended: Unattended) -> None:
    """The permission checks are real: the same token, asked for another VM's stop or the host's PCI list, is
    refused (and a VM it may not audit is absent from the listing, as upstream's filter leaves it out)."""
    from node.proxmox import Proxmox, ProxmoxFailed

    api = Proxmox(unattended.facts.proxmox_endpoint, True)
    api.login(f"{REPAIR_TOKEN}={REPAIR_SECRET}", None)
    with pytest.raises(ProxmoxFailed, match="403"):
        api.call("GET", "/nodes/pve-dc2/hardware/pci")
    del unattended.lab.pve.state.token_acls[f"{REPAIR_TOKEN}={REPAIR_SECRET}"]["/vms/4101"]
    with pytest.raises(ProxmoxFailed, match="403"):
        api.call("POST", "/nodes/pve-dc1/qemu/4101/status/shutdown", {"timeout": "1"})
    assert 4101 not in {g["vmid"] for g in api.call("GET", "/cluster/resources?type=vm")}


def test_the_watcher_pod_is_admitted_under_pod_security_restricted_and_the_node_check_job_only_where_privileged(
    unattended: Unattended,
) -> None:
    """The API server's PodSecurity admission (on by default) on what the stack registers: the watcher's pod runs in
    its restricted namespace (KWOK plays the kubelet); the node-check Job's pod, with its host mounts and SYSLOG,
    is admitted in the privileged namespace and refused in a restricted one."""
    from components.unattended.watcher import code_digest, watcher_code, watcher_deployment, watcher_zip

    pool, cfg = unattended.lab, unattended.stack.repair.unattended
    code = watcher_code(cfg, watcher_zip(), unattended.facts.as_json())
    for obj in (code, watcher_deployment(cfg, code_digest(code))):
        pool.kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(obj))

    def running() -> bool:
        pods = pool.kubectl.json("-n", cfg.namespace, "get", "pods", "-l", "app.kubernetes.io/name=gpu-pool-repair")
        return any(p["status"].get("phase") == "Running" for p in pods["items"])

    eventually("the watcher's pod admitted and running", running)
    template = unattended.facts.node_check_jobs[DC2]
    job = json.loads(json.dumps(template))
    job["metadata"]["namespace"] = cfg.namespace
    job["metadata"]["name"] = "node-check-in-a-restricted-namespace"
    pool.kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(job))

    def refused() -> str:
        found = pool.kubectl.json("-n", cfg.namespace, "get", "events", "--field-selector", "reason=FailedCreate")
        return next((e["message"] for e in found["items"] if "violates PodSecurity" in e["message"]), "")

    message = eventually("the Job's pod refused by PodSecurity restricted", refused)
    assert "hostPath" in message or "restricted" in message
