"""Issue 48 (a), FIELD-REVIEW-6 part A WRONG-3: the unattended watcher repairs a node that is in the GPU Operator's
`upgrade-required` when the fault comes, with the operator's own upgrade controller running (the `deployed` stack,
tests/e2e/engine_deployed.py, the operator v26.7.0 built from source and nudged to reconcile every few seconds).

Before node/, the watcher's hold set neither the operator's skip label nor its initial-state mark: the operator
started its own upgrade on the cordoned node alongside the watcher's drain and uncordoned it before the watcher's
node-check and smoke test. Here the watcher runs node/'s turn (in this process, with the cluster's admin
kubeconfig through the kubectl transport, `pulumi up`'s own): while its drain runs the operator is held off
(`upgrade-required` throughout), and the node stays cordoned from the watcher's hold to its end, whatever the
operator does after the drain (its upgrade of the node included: the watcher's gate waits for `upgrade-done` on
the pinned driver). dc2 is sampled every 0.3 s from the hold to the end.

KWOK runs no container, so node-check's reports are given to the watcher (dc2's Xid 79, then healthy, without the
capture's card facts: prod's dc2 is an A1000); Proxmox is the deployed stack's stand-in.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.gpu_platform.health_check import pool_facts_document
from components.stack_check import validate_stack
from components.unattended.credential import TOKEN_SECRET_KEY
from components.unattended.node_check_job import node_check_namespace
from components.unattended.objects import SECRET_NAME, build_watcher_access
from components.unattended.watcher_facts import watcher_facts_document
from day2.doctor.node_report import NodeCheck, parse_node_check
from day2.repair.watcher import Limits, Watcher, one_pass
from day2.repair.watcher_core import WatcherFacts
from node.kube import Kube, Kubectl
from node.proxmox import Proxmox
from node.vocabulary import (
    DRIVER_UPGRADE_SKIP_LABEL,
    DRIVER_UPGRADE_STATE_LABEL,
    HEALTH_CONDITION,
    TURN_STATE_LABEL,
)
from offline.runner import PROJECT
from tests.e2e.engine_deployed import STACK, Deployed

DC2 = "rke2-worker-dc2-gpu-a"
REPAIR = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}


def report(xid: bool) -> NodeCheck:
    """node-check's report of prod's dc2 as its Job would print it (KWOK runs no container): every floor ok, and
    with `xid` an Xid 79 in its kernel log (the floor's power-cycle fix). No card facts: they are the card's own."""
    floors = [
        {"name": "pci", "ok": True, "detail": "the stack's card on the bus"},
        {"name": "link", "ok": True, "detail": "as trained as the card allows"},
        {"name": "driver", "ok": True, "detail": "the GPU Operator's driver loaded"},
        {"name": "nvml", "ok": None, "detail": "skipped: no NVML in the Job's image"},
        {
            "name": "health",
            "ok": not xid,
            "detail": "Xid 79 at 0000:01:00: GPU has fallen off the bus" if xid else "ok",
        },
    ]
    fix = {"traps": [], "command": "power cycle the VM from Proxmox", "powerCycle": True} if xid else None
    document = {"node": DC2, "floors": floors, "firstBroken": "health" if xid else None, "fix": fix}
    return parse_node_check(document, "the Job's log")


@dataclass
class Samples:
    kube: Kube
    seen: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                node = self.kube.node(DC2) or {}
            except Exception:  # the sampler only watches; a failed read is a missed sample
                continue
            labels = node.get("metadata", {}).get("labels") or {}
            self.seen.append(
                {
                    "turn": labels.get(TURN_STATE_LABEL, ""),
                    "upgrade": labels.get(DRIVER_UPGRADE_STATE_LABEL, ""),
                    "skip": labels.get(DRIVER_UPGRADE_SKIP_LABEL, ""),
                    "cordoned": bool(node.get("spec", {}).get("unschedulable")),
                }
            )
            time.sleep(0.3)


@pytest.fixture
def watcher_on_deployed(deployed: Deployed) -> Iterator[tuple[Deployed, Watcher]]:
    kubectl = deployed.plane.kubectl
    argv = [str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir", str(kubectl.cache_dir)]
    raw = copy.deepcopy(deployed.base)
    raw[f"{PROJECT}:repair"] = REPAIR
    stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in raw.items()})
    cfg = stack.repair.unattended
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": cfg.namespace},
        "data": {TOKEN_SECRET_KEY: base64.b64encode(deployed.pve.token.encode()).decode()},
    }
    access = build_watcher_access(cfg)
    objects = [access[0], node_check_namespace(cfg), *access[1:], secret]
    for obj in objects:
        kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(obj))
    facts = WatcherFacts.from_json(
        json.loads(json.dumps(watcher_facts_document(stack, STACK, pool_facts_document(stack, STACK))))
    )
    watcher = Watcher(
        Kube(Kubectl(argv), component="gpu-pool-repair-watcher"),
        facts,
        io.StringIO(),
        poll_seconds=1,
        limits=Limits(drain=3, ready=6, node_check=2, smoke=6),
    )
    reports = {"before": report(xid=True), "after": report(xid=False)}
    watcher.node_check = lambda w, host, attempt: (reports[attempt], "")

    def stand_in(facts: WatcherFacts, token: str) -> Proxmox:
        pve = Proxmox(deployed.pve.endpoint, True)
        pve.login(token, None)
        call = pve.call

        def as_the_repair_token(method: str, path: str, form: dict[str, str] | None = None) -> Any:
            # The stand-in's token is the stack's own; the repair token's view of itself is its role.
            if path == "/access/permissions":
                return {p: dict.fromkeys(privileges, 0) for p, privileges in facts.allowed.items()}
            return call(method, path, form)

        pve.call = as_the_repair_token  # type: ignore[method-assign]
        return pve

    watcher.connect = stand_in
    try:
        yield deployed, watcher
    finally:
        kubectl.run(
            "delete", "namespace", cfg.namespace, cfg.node_check_namespace, "--ignore-not-found", "--wait=false"
        )
        kubectl.run("label", "node", DC2, f"{DRIVER_UPGRADE_STATE_LABEL}=upgrade-done", "--overwrite")
        kubectl.run("uncordon", DC2)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        healthy = {"type": HEALTH_CONDITION, "status": "True", "reason": "AllFloorsOk", "message": "ok"}
        patch = {"status": {"conditions": [healthy | {"lastHeartbeatTime": now, "lastTransitionTime": now}]}}
        kubectl.run("patch", "node", DC2, "--subresource=status", "-p", json.dumps(patch))


def test_a_the_watcher_repairs_a_node_in_upgrade_required_and_the_operator_neither_evicts_nor_uncordons_it_first(
    watcher_on_deployed: tuple[Deployed, Watcher],
) -> None:
    deployed, watcher = watcher_on_deployed
    kubectl = deployed.plane.kubectl
    # A node the operator left in upgrade-required with its driver pod in sync (after a reverted driver wave: the
    # review's scenario), serving, when the health check marks it.
    kubectl("label", "node", DC2, f"{DRIVER_UPGRADE_STATE_LABEL}=upgrade-required", "--overwrite")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    marked = {"type": HEALTH_CONDITION, "status": "False", "reason": "NodeHealthBroken", "message": "marked"}
    patch = {"status": {"conditions": [marked | {"lastHeartbeatTime": now, "lastTransitionTime": now}]}}
    kubectl("patch", "node", DC2, "--subresource=status", "-p", json.dumps(patch))
    samples = Samples(Kube(watcher.kube.transport))
    sampler = threading.Thread(target=samples.run, daemon=True)
    sampler.start()
    try:
        done = one_pass(watcher)
    finally:
        samples.stop.set()
        sampler.join(timeout=10)
    log = watcher.out.getvalue()  # type: ignore[attr-defined]

    assert done == f"{DC2} repaired", done + "\n" + log[-3000:]
    held = [s for s in samples.seen if s["turn"] == "repairing"]
    assert held, samples.seen
    # From the turn's cordon (right after its hold and the operator's skip label) to its end the node is never
    # schedulable: the operator did not uncordon it before the watcher's gate.
    cordoned = held[next(i for i, s in enumerate(held) if s["cordoned"]) :]
    assert all(s["cordoned"] for s in cordoned), [s for s in cordoned if not s["cordoned"]]
    # While the operator is held off (the drain), it does not move dc2 on: no cordon, no GPU-pod deletion of its own.
    during_drain = [s for s in held if s["skip"] == "true"]
    assert during_drain and {s["upgrade"] for s in during_drain} == {"upgrade-required"}, during_drain
    # The operator ran its upgrade of dc2 once the drain was done, and ended it with dc2 still cordoned (the
    # initial-state mark): the watcher's gate waited for that, and only the watcher's end uncordoned it.
    assert any(s["upgrade"] == "upgrade-done" and s["cordoned"] for s in held), held
    final = kubectl.json("get", "node", DC2)
    assert final["metadata"]["labels"].get(DRIVER_UPGRADE_STATE_LABEL) in ("upgrade-done", None)
    assert final["metadata"]["labels"][TURN_STATE_LABEL] == "done" and not final["spec"].get("unschedulable")
    assert deployed.pve.requests("POST", "/qemu/4201/status/")
