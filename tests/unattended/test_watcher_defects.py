"""FIELD-REVIEW-6 part A WRONG-3..7 and part B W-2 against the watcher's loop, each by the failure the review found:
the watcher drives node/'s turn, so its hold is the wave's, it reads the pool again before it acts, an API error in
a wait is not a failed repair, its Lease is a process's, a Proxmox failure before the hold is one judged refusal,
a bare pod stops it, and a stop task that fails on a lock charges nothing."""

from __future__ import annotations

import json
from typing import Any

from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME
from day2.doctor.node_report import NodeCheck
from day2.repair.unattended import breaker_of
from day2.repair.watcher import Watcher, one_pass
from node.kube import Answer
from node.vocabulary import (
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION,
    DRIVER_UPGRADE_SKIP_LABEL,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
)
from tests.node.memory_api import Fault
from tests.unattended.test_watcher_loop import (
    DC2,
    NS,
    WatcherApi,
    cluster,
    healthy_report,
    node_checks,
    reasons,
    watcher,
    xid_report,
)

DC1 = "rke2-worker-dc1-gpu-a"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}"


def posts(proxmox: Any) -> list[str]:
    return [path for method, path in proxmox.calls if method == "POST"]


def breaker(api: WatcherApi) -> Any:
    return breaker_of(api.objects[f"/api/v1/namespaces/{NS}/configmaps/{BREAKER_CONFIGMAP}"]["data"])


def test_the_watchers_hold_holds_the_operator_off_until_its_drain_is_done_and_marks_the_initial_state() -> None:
    """WRONG-3: the watcher cordoned without the skip label and the initial-state mark, so a pending driver upgrade
    ran on its node and the operator uncordoned it before the watcher's node-check."""
    api = cluster(DC2)
    seen: list[tuple[str, str]] = []
    forward = api.request

    def request(method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        if path.endswith("/eviction"):
            node = api.node(DC2)["metadata"]
            seen.append(
                (
                    node["labels"].get(DRIVER_UPGRADE_SKIP_LABEL, ""),
                    node["annotations"].get(DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION, ""),
                )
            )
        return forward(method, path, body, content_type)

    api.request = request  # type: ignore[method-assign]
    w, _ = watcher(api, {DC2: [xid_report(), healthy_report()]})
    assert one_pass(w) == f"{DC2} repaired"
    assert seen and set(seen) == {("true", "true")}
    after = api.node(DC2)["metadata"]
    assert DRIVER_UPGRADE_SKIP_LABEL not in after["labels"]
    assert DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION not in after["annotations"]


def test_a_repair_that_did_not_fix_leaves_the_node_cordoned_even_if_the_operator_uncordoned_it() -> None:
    api = cluster(DC2)
    w, _ = watcher(api, {DC2: [xid_report(), xid_report()]})

    def operator_uncordons(watcher: Watcher, host: str, attempt: str) -> tuple[NodeCheck | None, str]:
        if attempt == "after":
            api.node(DC2)["spec"].pop("unschedulable", None)
        from day2.repair.watcher import job_node_check

        return job_node_check(watcher, host, attempt)

    w.node_check = operator_uncordons
    assert one_pass(w).startswith(f"{DC2} stopped: the power cycle did not fix it")
    assert api.node(DC2)["spec"]["unschedulable"] is True
    assert api.node(DC2)["metadata"]["labels"][TURN_STATE_LABEL] == "stopped"


def test_a_wave_that_takes_another_domain_while_node_check_runs_makes_the_watcher_refuse() -> None:
    """WRONG-4: the watcher checked 'every other domain serves' on the snapshot of its pass, minutes old."""
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report()]})
    from day2.repair.watcher import job_node_check

    def wave_starts(watcher: Watcher, host: str, attempt: str) -> tuple[NodeCheck | None, str]:
        dc1 = api.node(DC1)
        dc1["spec"]["unschedulable"] = True
        dc1["metadata"]["labels"][TURN_STATE_LABEL] = "draining"
        dc1["metadata"].setdefault("annotations", {})[TURN_HOLDER_ANNOTATION] = "up:h200-lab since 2026-12-05T03:01:00Z"
        return job_node_check(watcher, host, attempt)

    w.node_check = wave_starts
    done = one_pass(w)
    assert "AnotherDomainOut" in reasons(api) or "NodeHeld" in reasons(api), done
    assert posts(proxmox) == []
    assert not api.node(DC2)["spec"].get("unschedulable")
    assert not [name for name in api.evicted if name == "notebook-0"]


def test_a_domain_that_goes_out_during_the_drain_stops_the_repair_before_the_power_cycle() -> None:
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report(), healthy_report()]})
    forward = api.request

    def request(method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        if path.endswith("/eviction"):
            api.node(DC1)["spec"]["unschedulable"] = True  # someone cordons dc1 meanwhile
        return forward(method, path, body, content_type)

    api.request = request  # type: ignore[method-assign]
    done = one_pass(w)
    assert done.startswith(f"{DC2} stopped: stopped before the power cycle"), done
    assert "/status/shutdown" not in " ".join(posts(proxmox))
    assert breaker(api).failures == ()


def test_an_api_server_restart_during_the_repairs_waits_is_not_a_repair_that_did_not_fix() -> None:
    """WRONG-5: one 503 or refused connection in a wait ended the repair and counted against the breaker."""
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report(), healthy_report()]})
    call = proxmox.call

    def restarts_at_the_start(method: str, path: str, form: dict[str, str] | None = None) -> Any:
        if method == "POST" and path.endswith("/status/start"):
            # kube-apiserver restarts while the VM boots: refused connections, then 503s, on every read of the wait.
            api.faults += [
                Fault("GET", f"/api/v1/nodes/{DC2}", None, times=14, sent=False),
                Fault("GET", "/api/v1/namespaces/gpu-operator/pods", 503, times=12),
            ]
        return call(method, path, form)

    proxmox.call = restarts_at_the_start  # type: ignore[method-assign]
    assert one_pass(w) == f"{DC2} repaired"
    assert breaker(api).failures == ()
    assert any(f.times == 0 for f in api.faults)


def left_by_a_dead_watcher(api: WatcherApi, *, cycled: bool) -> None:
    """dc2 as a watcher pod left it when it was killed mid-repair: held `repairing`, cordoned, drained; its Lease's
    term run out."""
    node = api.node(DC2)
    node["spec"]["unschedulable"] = True
    node["metadata"]["labels"][TURN_STATE_LABEL] = "repairing"
    node["metadata"]["annotations"].update(
        {
            TURN_HOLDER_ANNOTATION: "repair:unattended@h200-lab since 2026-12-05T02:30:00Z",
            "gpu-pool.dev/wave-cordoned": "dc2",
            "gpu-pool.dev/wave-turn": "repair 2026-12-05T02:30:00Z",
        }
    )
    if cycled:
        record = [{"at": "2026-12-05T02:40:00Z", "event": "power-cycle", "reason": "node:health: Xid 79"}]
        node["metadata"]["annotations"]["gpu-pool.dev/repairs"] = json.dumps(record)
    api.objects[LEASE]["spec"].update(
        holderIdentity="watcher-old_1", renewTime="2026-12-05T02:29:00.000000Z", leaseDurationSeconds=1800
    )
    api.objects.pop("/api/v1/namespaces/ml/pods/notebook-0", None)


def test_a_hold_its_dead_watcher_left_after_the_power_cycle_is_checked_again_and_ended() -> None:
    """WRONG-5: the watcher skipped its own `repairing` hold forever, and refused every other domain for it."""
    api = cluster()
    left_by_a_dead_watcher(api, cycled=True)
    w, proxmox = watcher(api, {DC2: [healthy_report()]})
    assert one_pass(w) == f"{DC2} repaired"
    assert posts(proxmox) == []
    assert node_checks(api) == [(DC2, "after")]
    node = api.node(DC2)
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "done" and not node["spec"].get("unschedulable")


def test_a_hold_its_dead_watcher_left_before_the_power_cycle_is_stopped_cordoned_and_says_why() -> None:
    api = cluster()
    left_by_a_dead_watcher(api, cycled=False)
    w, proxmox = watcher(api, {})
    assert one_pass(w) == f"{DC2} stopped: the watcher that held it ended before its power cycle"
    node = api.node(DC2)
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "stopped" and node["spec"]["unschedulable"] is True
    assert breaker(api).failures == ()
    assert posts(proxmox) == []


def test_a_second_watcher_process_of_the_stack_waits_for_the_lease() -> None:
    api = cluster(DC2)
    first, _ = watcher(api, {})
    assert first.the_lease.acquire(first.clock()) == ""
    second, proxmox = watcher(api, {DC2: [xid_report()]})
    done = one_pass(second)
    assert done.startswith("Lease gpu-pool-repair/gpu-pool-repair is held by "), done
    assert first.the_lease.holder in done and second.the_lease.holder != first.the_lease.holder
    assert posts(proxmox) == []


def test_proxmox_unreachable_before_the_hold_is_one_judged_refusal_and_one_event_not_one_job_per_pass() -> None:
    """WRONG-6: the failure escaped the verdict, so a privileged node-check Job started on the node every minute."""
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report(), xid_report(), xid_report()]})
    proxmox.down = True
    first = one_pass(w)
    one_pass(w)
    one_pass(w)
    assert "Proxmox cannot be asked now" in first
    assert node_checks(api) == [(DC2, "before")]
    assert reasons(api) == ["HostRefuses"]
    assert w.metrics.refusals == {(DC2, "HostRefuses"): 1}
    assert not api.node(DC2)["spec"].get("unschedulable")


def test_a_bare_pod_on_the_node_stops_the_watchers_repair_with_its_name_before_anything_changes() -> None:
    """WRONG-7: the watcher evicted pods without a controller, which `kubectl drain`, the wave and `repair` refuse."""
    api = cluster(DC2)
    api.objects["/api/v1/namespaces/ml/pods/debug"] = {
        "kind": "Pod",
        "metadata": {"name": "debug", "namespace": "ml", "resourceVersion": "1"},
        "spec": {"nodeName": DC2},
        "status": {"phase": "Running"},
    }
    w, proxmox = watcher(api, {DC2: [xid_report()]})
    done = one_pass(w)
    assert "cannot delete Pods that declare no controller: ml/debug" in done
    assert "/api/v1/namespaces/ml/pods/debug" in api.objects and api.evicted == []
    assert posts(proxmox) == []
    assert breaker(api).failures == ()
    assert "UnattendedRepairStopped" in reasons(api)


def test_a_stop_task_that_fails_on_a_backup_lock_charges_no_budget_and_no_breaker() -> None:
    """Part B W-2: qemu-server refuses a locked VM's stop in the task, not the POST; the budget was charged first."""
    api = cluster(DC2)
    w, proxmox = watcher(api, {DC2: [xid_report()]})
    proxmox.stop_exit = "VM is locked (backup)"
    done = one_pass(w)
    assert "the stop task of VM 4201 on pve-dc2 failed: VM is locked (backup)" in done
    records = json.loads(api.node(DC2)["metadata"]["annotations"]["gpu-pool.dev/repairs"])
    assert [r["event"] for r in records] == ["stopped"]
    assert breaker(api).failures == ()
