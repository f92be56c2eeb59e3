"""Every GPU node's driver upgrade as the GPU Operator's upgrade controller and a wave move it, sampled through the
API server: the node's upgrade state (the operator's label), its cordon, the driver version of its Ready driver pod.

Shared by the driver-upgrade tests: tests/e2e/test_gpu_operator_driver_upgrade.py (the operator alone, the test
cordoning as a wave would) and tests/e2e/test_driver_wave.py (the program's own wave, in `pulumi up`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from knowledge.gpu_operator import DRIVER_POD_SELECTOR, DRIVER_UPGRADE_STATE_LABEL
from tests.e2e.kube import Kubectl

# The operator's own mark on a node that was unschedulable when its upgrade began: such a node is left cordoned at
# the end (k8s-operator-libs pkg/upgrade/consts.go UpgradeInitialStateAnnotationKeyFmt, driver name "gpu").
INITIAL_STATE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
DONE, REQUIRED = "upgrade-done", "upgrade-required"
SAMPLE_SECONDS = 0.5
UPGRADE_SECONDS = 300


@dataclass
class Sample:
    at: float
    state: str
    unschedulable: bool
    driver: str  # the driver version of the node's Ready driver pod, "" if none is Ready
    initial_state: bool


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

    def sample(self) -> dict[str, Sample]:
        nodes = {n["metadata"]["name"]: n for n in self.kubectl.json("get", "nodes")["items"]}
        pods = self.kubectl.json("-n", self.namespace, "get", "pods", "-l", DRIVER_POD_SELECTOR)["items"]
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
            found[domain] = Sample(
                now,
                (node["metadata"].get("labels") or {}).get(DRIVER_UPGRADE_STATE_LABEL, ""),
                bool(node["spec"].get("unschedulable")),
                ready[0] if len(ready) == 1 else "",
                INITIAL_STATE_ANNOTATION in annotations,
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


@contextlib.contextmanager
def sampling(watch: Watch) -> Iterator[Watch]:
    """Sample every SAMPLE_SECONDS in a thread until the block ends; a failed sample is kept in `watch.errors`."""
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
