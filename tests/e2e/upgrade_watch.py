"""Every GPU node's driver upgrade as the GPU Operator's upgrade controller and a wave move it, sampled through the
API server: the node's upgrade state (the operator's label), its cordon, the driver version of its Ready driver pod.

Shared by the driver-upgrade tests: tests/e2e/test_gpu_operator_driver_upgrade.py (the operator alone, the test
cordoning as a wave would) and tests/e2e/test_driver_wave.py (the program's own wave, in `pulumi up`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from components.gpu_failure_domain.observed import ROLLOUT_ANNOTATION
from components.gpu_failure_domain.rollout import DRIVER_TEMPLATE_KEY
from knowledge.gpu_operator import (
    DRIVER_POD_SELECTOR,
    DRIVER_UPGRADE_DONE,
    DRIVER_UPGRADE_STATE_LABEL,
)
from knowledge.gpu_operator import (
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION as INITIAL_STATE_ANNOTATION,
)
from tests.e2e.kube import Kubectl

DONE, REQUIRED = DRIVER_UPGRADE_DONE, "upgrade-required"
SAMPLE_SECONDS = 0.5
UPGRADE_SECONDS = 300


@dataclass
class Sample:
    at: float
    state: str
    unschedulable: bool
    driver: str  # the driver version of the node's Ready driver pod, "" if none is Ready
    initial_state: bool
    rolled: str = ""  # the driver the node's last finished turn recorded (observed.ROLLOUT_ANNOTATION), "" if none
    template: str = ""  # the driver template's digest that record holds (rollout.DRIVER_TEMPLATE_KEY), "" if none


def out_of_service(sample: Sample) -> bool:
    """A node taken out by the upgrade: cordoned by it, or its driver pod gone or not Ready."""
    return sample.state not in ("", DONE, REQUIRED) or not sample.driver


def domain_out(sample: Sample) -> bool:
    """A failure domain out of service: cordoned (by the wave or by the operator), or `out_of_service`."""
    return sample.unschedulable or out_of_service(sample)


@dataclass
class Watch:
    """Every node's upgrade state, cordon and Ready driver version, sampled throughout a scenario."""

    kubectl: Kubectl
    namespace: str
    hosts: dict[str, str]  # domain -> node name
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Every upgrade state each domain's node took, from a watch on the Nodes (every change, in order): a state the
    # operator holds for less than a sample's round trip (two kubectl calls, seconds on a loaded machine) is in here
    # even when no sample caught it.
    transitions: dict[str, list[str]] = field(default_factory=dict)

    def states_seen(self, domain: str) -> set[str]:
        """The upgrade states the domain's node was seen in, by a sample or by the watch."""
        return {s.state for s in self.samples.get(domain, [])} | set(self.transitions.get(domain, []))

    def sample(self) -> dict[str, Sample]:
        api = self.kubectl.api
        nodes = {n["metadata"]["name"]: n for n in api.items("/api/v1/nodes")}
        pods = api.items(f"/api/v1/namespaces/{self.namespace}/pods", DRIVER_POD_SELECTOR)
        now = time.monotonic()
        found: dict[str, Sample] = {}
        for domain, host in self.hosts.items():
            node = nodes[host]
            ready = [
                p["spec"]["containers"][0]["image"].rsplit(":", 1)[1].split("-")[0]
                for p in pods
                if p["spec"].get("nodeName") == host
                and not p["metadata"].get("deletionTimestamp")
                and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (p.get("status") or {}).get("conditions") or []
                )
            ]
            annotations = node["metadata"].get("annotations") or {}
            record = json.loads(annotations.get(ROLLOUT_ANNOTATION) or "{}")
            found[domain] = Sample(
                now,
                (node["metadata"].get("labels") or {}).get(DRIVER_UPGRADE_STATE_LABEL, ""),
                bool(node["spec"].get("unschedulable")),
                ready[0] if len(ready) == 1 else "",
                INITIAL_STATE_ANNOTATION in annotations,
                str(record.get("driver", "")),
                str(record.get(DRIVER_TEMPLATE_KEY, "")),
            )
        for domain, one in found.items():
            self.samples.setdefault(domain, []).append(one)
        return found

    def until(self, what: str, check: Callable[[dict[str, Sample]], bool], seconds: float = UPGRADE_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while not check(self.sample()):
            if time.monotonic() > deadline:
                last = {d: s[-1] for d, s in self.samples.items()}
                raise AssertionError(f"not within {seconds:.0f} s: {what}; last seen {last}")
            time.sleep(SAMPLE_SECONDS)  # poll interval; bounded by the deadline above

    def moments(self, start: int = 0) -> list[dict[str, Sample]]:
        """The samples from the `start`-th on, one mapping of domain to sample per moment."""
        count = min(len(s) for s in self.samples.values()) if self.samples else 0
        return [{d: s[i] for d, s in self.samples.items()} for i in range(start, count)]


def _follow_transitions(watch: Watch) -> subprocess.Popen[str]:
    """`kubectl get nodes --watch`: one line per change of a Node, its name and upgrade state, read in a thread."""
    label = DRIVER_UPGRADE_STATE_LABEL.replace(".", "\\.")
    template = '{.metadata.name}{"\\t"}{.metadata.labels.' + label + '}{"\\n"}'
    kubectl = watch.kubectl
    follow = subprocess.Popen(
        [
            *(str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir", str(kubectl.cache_dir)),
            *("get", "nodes", "--watch", "-o", f"jsonpath={template}"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    domains = {host: domain for domain, host in watch.hosts.items()}

    def read() -> None:
        for line in follow.stdout or []:
            host, _, state = line.rstrip("\n").partition("\t")
            if host in domains:
                seen = watch.transitions.setdefault(domains[host], [])
                if not seen or seen[-1] != state:
                    seen.append(state)

    threading.Thread(target=read, name="upgrade-transitions", daemon=True).start()
    return follow


@contextlib.contextmanager
def sampling(watch: Watch) -> Iterator[Watch]:
    """Sample every SAMPLE_SECONDS in a thread until the block ends, and follow every Node change through a watch;
    a failed sample is kept in `watch.errors`."""
    follow = _follow_transitions(watch)
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            try:
                watch.sample()
            except Exception as error:  # reported by the test: a thread cannot fail it
                watch.errors.append(repr(error))
            stopping.wait(SAMPLE_SECONDS)

    thread = threading.Thread(target=loop, name="upgrade-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stopping.set()
        thread.join(timeout=60)
        watch.sample()
        follow.terminate()
        follow.wait(timeout=30)
