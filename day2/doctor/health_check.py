"""The in-cluster health check: doctor's floors of every GPU node, written on each Node as the condition
GpuPoolHealthy, which kube-state-metrics exports (`kube_node_status_condition`) and the GpuNodeFloorBroken alert
reads. A CronJob the stack deploys with `repair.healthCheck.enabled` runs it.

It runs in a stock python image on the standard library (and PyYAML's pure-Python package, for the sharing
profiles): the stack puts it in a ConfigMap as one zip (day2/bundle.py) beside the pool's facts as JSON (what
`--stack` gives doctor), and the pod runs `python3 health-check.pyz --facts facts.json`. It reads the API with
its ServiceAccount's token (node/kube.py's client over REST): nodes; pods, the time-slicing ConfigMap and the
smoke Jobs in their namespaces; it patches only Node status. No Proxmox credential: a broken floor is an alert,
the repair stays a human's (`gpu-pool repair <node> --stack <stack>`, which the alert's runbook names).

Exit 0 when every GPU node's verdict was written (broken floors included: they are the verdicts), 1 when the
API could not be read or a Node not patched (the Job fails, and GpuPoolHealthCheckNotRunning says so), 2 on bad
input.
"""

from __future__ import annotations

import datetime
import json
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.shared.health_condition import CONDITION
from config.arguments import ArgumentParser
from day2 import objects as o
from day2.doctor.walk import Diagnosis, diagnose_all
from day2.pool import PoolFacts, facts_from_document
from node.kube import STRATEGIC, ApiError, Kube, Rest

HEALTHY_REASON = "AllFloorsOk"
MESSAGE_LIMIT = 1024


def read_snapshot(api: Kube, facts: PoolFacts) -> o.Snapshot:
    """What doctor's floors read, each from where the stack puts it (and only what the CronJob's RBAC grants)."""
    items = api.list("/api/v1/nodes", "Node")
    items += api.list(f"/api/v1/namespaces/{facts.operator_namespace}/pods", "Pod")
    configmap = api.get(f"/api/v1/namespaces/{facts.operator_namespace}/configmaps/{facts.time_slicing_configmap}")
    if configmap is not None:
        items.append({"kind": "ConfigMap", **configmap})
    if facts.smoke_test_enabled:
        items += api.list(f"/apis/batch/v1/namespaces/{facts.smoke_namespace}/jobs", "Job")
    return o.Snapshot.from_items(items)


# ---------------------------------------------------------------------------------------------------- the verdict


def reason_of(floor: str | None) -> str:
    """A condition reason is CamelCase: `node:health` -> NodeHealthBroken, `sharing-config` -> SharingConfigBroken."""
    if floor is None:
        return HEALTHY_REASON
    words = floor.replace(":", "-").split("-")
    return "".join(word[:1].upper() + word[1:] for word in words) + "Broken"


def condition_of(diagnosis: Diagnosis, stack: str | None, now: str, before: Mapping[str, Any] | None) -> dict[str, str]:
    status = "True" if diagnosis.healthy else "False"
    if diagnosis.healthy:
        message = "every floor doctor checks in the cluster is ok (the node's own, below the driver pod: node-check)"
    else:
        floor = next((f for f in diagnosis.floors if f.name == diagnosis.first_broken), None)
        detail = floor.detail if floor is not None else ""
        fix = f"; next: {diagnosis.fix.command}" if diagnosis.fix is not None else ""
        repair = f"gpu-pool repair {diagnosis.node} --stack {stack}" if stack else f"gpu-pool repair {diagnosis.node}"
        message = f"{diagnosis.first_broken}: {detail}{fix}; a faulted card: {repair}"
    # The transition time moves only when the status does (as the kubelet keeps its own conditions).
    moved = before is None or before.get("status") != status
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason_of(diagnosis.first_broken),
        "message": message[:MESSAGE_LIMIT],
        "lastHeartbeatTime": now,
        "lastTransitionTime": now if moved else str(before.get("lastTransitionTime") or now) if before else now,
    }


def write_verdicts(api: Kube, facts: PoolFacts, now: datetime.datetime, out: Any) -> int:
    snapshot = read_snapshot(api, facts)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    present = {o.name(n): n for n in snapshot.nodes}
    failures = 0
    for diagnosis in diagnose_all(snapshot, facts):
        node = present.get(diagnosis.node)
        if node is None:
            # A stack's node that is not registered has no status to write on: doctor's node floor, in the log.
            out.write(f"{diagnosis.node}: no Node to write on ({diagnosis.first_broken} broken)\n")
            continue
        before = o.condition(node, CONDITION)
        condition = condition_of(diagnosis, facts.stack, stamp, before)
        # A strategic merge patch keyed on the condition type: the kubelet's own conditions are left alone.
        patch = {"status": {"conditions": [condition]}}
        path = f"/api/v1/nodes/{urllib.parse.quote(diagnosis.node)}/status"
        try:
            api.patch(path, patch, STRATEGIC)
        except ApiError as error:
            failures += 1
            out.write(f"{diagnosis.node}: could not write {CONDITION}: {error}\n")
            continue
        verdict = "healthy" if diagnosis.healthy else f"broken at {diagnosis.first_broken}"
        out.write(f"{diagnosis.node}: {verdict} ({CONDITION}={condition['status']}, {condition['reason']})\n")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None, *, out: Any = None, err: Any = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    parser = ArgumentParser(prog="gpu-pool health-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", required=True, type=Path, help="the pool's facts (JSON, from the stack)")
    parser.add_argument("--server", help="the API server (default: in the pod, the kubernetes service)")
    parser.add_argument("--token-file", type=Path, help="a bearer token (default: the pod's ServiceAccount's)")
    parser.add_argument("--ca-file", help="the API server's CA (default: the pod's ServiceAccount's)")
    args = parser.parse_args(argv)
    try:
        facts = facts_from_document(json.loads(args.facts.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        err.write(f"gpu-pool health-check: --facts {args.facts}: {error}\n")
        return 2
    try:
        if args.server:
            token = args.token_file.read_text().strip() if args.token_file else ""
            api = Kube(Rest(args.server, token, args.ca_file), component="gpu-pool-health-check")
        else:
            api = Kube(Rest.in_cluster(), component="gpu-pool-health-check")
        return write_verdicts(api, facts, datetime.datetime.now(datetime.UTC), out)
    except (ApiError, OSError) as error:
        err.write(f"gpu-pool health-check: {error}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
