"""The unattended watcher under adversity, on the e2e control plane (tests/e2e/test_unattended_repair.py's lab: the
real kube-apiserver with the stack's RBAC as the watcher's ServiceAccount, KWOK's Nodes, the Proxmox stand-in with
the repair token's real permission checks). FIELD-REVIEW-6 part A, as issue 48 lists them:

(b) a wave's hold taken on another domain while the watcher's node-check runs makes the watcher refuse;
(c) the API server gone (refusing connections) during a repair's wait does not count against the breaker and leaves
    no stuck hold;
(d) a second watcher process of the same stack waits for the Lease (and leaves the first's repair alone);
(e) the Proxmox stand-in unreachable before the hold creates one node-check Job, one judged refusal and one Event,
    not one per pass;
(f) a bare pod on the node stops the watcher's repair with its name, as it stops `gpu-pool repair`.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from components.gpu_platform.health_check import pool_facts_document
from components.unattended.objects import LEASE_NAME
from components.unattended.watcher import watcher_zip
from components.unattended.watcher_facts import watcher_facts_document
from day2.doctor.node_report import NodeCheck
from day2.repair.watcher import Watcher, job_node_check, one_pass
from day2.repair.watcher_core import VERDICT_ANNOTATION
from node.kube import Kube, Kubectl
from node.proxmox import Proxmox
from node.turn import Turn, cordon, take_hold
from node.vocabulary import TURN_HOLDER_ANNOTATION, TURN_STATE_LABEL, TurnState

# The lab and the watcher's objects (test_unattended_repair's fixtures), used here by name.
from tests.e2e.test_repair import DC2, HEALTHY_REPORT, XID_REPORT, kubectl, lab, namespaces  # noqa: F401
from tests.e2e.test_unattended_repair import DC1, Unattended, unattended  # noqa: F401


@pytest.fixture
def u(unattended: Unattended) -> Unattended:  # noqa: F811
    return unattended


def argv(u: Unattended) -> list[str]:
    """kubectl as the lab runs it, for node/'s kubectl transport (what `pulumi up`'s steps run)."""
    k = u.lab.kubectl
    return [str(k.binary), "--kubeconfig", str(k.kubeconfig), "--cache-dir", str(k.cache_dir)]


def node_check_jobs(u: Unattended) -> list[str]:
    found = u.lab.kubectl.json("-n", u.stack.repair.unattended.node_check_namespace, "get", "jobs")["items"]
    return sorted(j["metadata"]["name"] for j in found)


def lease(u: Unattended) -> dict[str, Any]:
    found: dict[str, Any] = u.lab.kubectl.json("-n", u.stack.repair.unattended.namespace, "get", "lease", LEASE_NAME)
    return found


def test_b_a_waves_hold_on_another_domain_taken_during_node_check_makes_the_watcher_refuse(u: Unattended) -> None:
    u.mark(DC2)
    u.reports[DC2] = [XID_REPORT, HEALTHY_REPORT]
    w = u.watcher()
    wave = Turn(Kube(Kubectl(argv(u))), DC1, "up:prod", "dc1")

    def a_wave_starts_meanwhile(watcher: Watcher, host: str, attempt: str) -> tuple[NodeCheck | None, str]:
        found = job_node_check(watcher, host, attempt)
        # `pulumi up`'s turn on dc1 takes its hold and cordons while dc2's node-check runs (node/'s transitions).
        take_hold(wave, TurnState.DRAINING)
        cordon(wave, "2026-12-06T03:01:00Z")
        return found

    w.node_check = a_wave_starts_meanwhile
    done = one_pass(w)

    # The verdict after node-check reads every domain again: dc1 is held by a wave now, so dc2 is refused, judged.
    assert done == "nothing to repair", done
    assert u.lab.vm_calls(4201) == []
    node = u.lab.node(DC2)
    assert not node["spec"].get("unschedulable") and TURN_STATE_LABEL not in (node["metadata"].get("labels") or {})
    verdict = node["metadata"]["annotations"][VERDICT_ANNOTATION]
    assert "NodeHeld" in verdict or "AnotherDomainOut" in verdict


class Proxy:
    """A TCP forwarder in front of the API server that can go away (refusing connections, as a restarting
    kube-apiserver does) and come back on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.down = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            if self.down.is_set():
                time.sleep(0.05)
                continue
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen()
            listener.settimeout(0.1)
            while not self.down.is_set() and not self.stopped.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=self._pipe, args=(client,), daemon=True).start()
            listener.close()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return

        def one_way(source: socket.socket, sink: socket.socket) -> None:
            try:
                while data := source.recv(65536):
                    if self.down.is_set():
                        break
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    with suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=one_way, args=(upstream, client), daemon=True).start()
        one_way(client, upstream)

    def away(self, seconds: float) -> None:
        self.down.set()
        threading.Timer(seconds, self.down.clear).start()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


@contextmanager
def proxied(u: Unattended) -> Iterator[Proxy]:
    host, port = u.server.removeprefix("https://").split(":")
    proxy = Proxy((host, int(port)))
    try:
        yield proxy
    finally:
        proxy.close()


def test_c_the_api_server_gone_during_the_repairs_wait_is_not_a_failed_repair_nor_a_stuck_hold(u: Unattended) -> None:
    u.mark(DC2)
    u.reports[DC2] = [XID_REPORT, HEALTHY_REPORT]
    with proxied(u) as proxy:
        w = dataclasses.replace(u, server=f"https://127.0.0.1:{proxy.port}").watcher()
        connect = w.connect

        def gone_at_the_start(facts: Any, token: str) -> Proxmox:
            pve = connect(facts, token)
            call = pve.call

            def call_then_go(method: str, path: str, form: dict[str, str] | None = None) -> Any:
                answer = call(method, path, form)
                if method == "POST" and path.endswith("/status/start"):
                    proxy.away(20)  # while the VM boots: the watcher waits for the node, the API refuses
                return answer

            pve.call = call_then_go  # type: ignore[method-assign]
            return pve

        w.connect = gone_at_the_start
        started = time.monotonic()
        done = one_pass(w)
    assert done == f"{DC2} repaired", done + "\n" + w.out.getvalue()[-2000:]  # type: ignore[attr-defined]
    assert time.monotonic() - started >= 20
    assert u.breaker().failures == ()
    node = u.lab.node(DC2)
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "done" and not node["spec"].get("unschedulable")
    assert not lease(u)["spec"].get("holderIdentity")


def test_d_a_second_watcher_process_of_the_stack_waits_for_the_lease_and_leaves_the_repair_alone(
    u: Unattended, tmp_path: Path
) -> None:
    first = u.watcher()
    assert first.the_lease.acquire(first.clock()) == ""
    # The first process is at dc2's repair: its hold is the stack's watcher's.
    turn = Turn(Kube(Kubectl(argv(u))), DC2, u.facts.holder, "dc2")
    take_hold(turn, TurnState.REPAIRING)
    cordon(turn, "repair 2026-12-06T03:00:00Z")
    (tmp_path / "watcher.pyz").write_bytes(watcher_zip())
    facts = watcher_facts_document(u.stack, "prod", pool_facts_document(u.stack, "prod"))
    (tmp_path / "facts.json").write_text(json.dumps(facts), encoding="utf-8")
    (tmp_path / "token").write_text(u.token, encoding="utf-8")
    flags = ["--facts", "facts.json", "--server", u.server, "--token-file", "token", "--ca-file", u.ca, "--once"]

    second = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "watcher.pyz", *flags, "--metrics-port", "0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip

    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{DC2} is being repaired by {first.the_lease.holder}" in second.stdout
    assert lease(u)["spec"]["holderIdentity"] == first.the_lease.holder
    node = u.lab.node(DC2)
    assert node["metadata"]["labels"][TURN_STATE_LABEL] == "repairing" and node["spec"]["unschedulable"] is True
    assert u.lab.vm_calls(4201) == []
    first.the_lease.release()


def test_e_proxmox_unreachable_before_the_hold_is_one_node_check_one_judged_refusal_and_one_event(
    u: Unattended,
) -> None:
    u.mark(DC2)
    u.reports[DC2] = [XID_REPORT, XID_REPORT, XID_REPORT]
    w = u.watcher()
    w.facts = dataclasses.replace(w.facts, proxmox_endpoint="https://127.0.0.1:9")

    said = [one_pass(w) for _ in range(3)]

    assert "Proxmox cannot be asked now" in said[0], said
    assert len(node_check_jobs(u)) == 1
    assert u.events(DC2) == ["HostRefuses"]
    assert w.metrics.refusals == {(DC2, "HostRefuses"): 1}
    assert "HostRefuses" in u.lab.node(DC2)["metadata"]["annotations"][VERDICT_ANNOTATION]
    assert not u.lab.node(DC2)["spec"].get("unschedulable")


def test_f_a_bare_pod_on_the_node_stops_the_watchers_repair_with_its_name(u: Unattended) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-debug", "namespace": "default"},
        "spec": {
            "nodeName": DC2,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "debug", "image": "busybox"}],
        },
    }
    u.lab.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    try:
        u.mark(DC2)
        u.reports[DC2] = [XID_REPORT]
        done = one_pass(u.watcher())
        assert "cannot delete Pods that declare no controller: default/gpu-debug" in done, done
        assert u.lab.kubectl.json("-n", "default", "get", "pod", "gpu-debug")["metadata"]["name"] == "gpu-debug"
        assert u.lab.vm_calls(4201) == []
        assert u.breaker().failures == ()
        node = u.lab.node(DC2)
        assert node["metadata"]["labels"][TURN_STATE_LABEL] == "stopped" and node["spec"]["unschedulable"] is True
        note = node["metadata"]["annotations"]["gpu-pool.dev/wave-stopped"]
        assert "default/gpu-debug" in note and TURN_HOLDER_ANNOTATION in node["metadata"]["annotations"]
    finally:
        u.lab.kubectl.run("-n", "default", "delete", "pod", "gpu-debug", "--grace-period=0", "--force")
        u.release(DC2)
