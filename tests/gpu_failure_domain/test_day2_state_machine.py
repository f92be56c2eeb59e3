"""Day 2 against adversity, as a mechanism (issue 36 item 7): hypothesis drives the pure plan (turns.plan_wave, the
turns it plans, day2/repair/decide.py guard rails) through random sequences of stack changes, `up` runs that complete,
are interrupted at any step or fail a gate, nodes going NotReady and back, admins cordoning, the GPU Operator marking
`upgrade-failed`, and repairs during waves and waves during repairs. After every step:

- never more domains out by gpu-pool's hand (a turn in progress, or held by a repair) than `rollout.maxUnavailable`;
- every node gpu-pool cordoned says why: its `wave-stopped` reason, or a turn state with its holder;
- nothing raises: every `up` plans (turns.plan_wave) and a refusal is a list of sentences, never a traceback;

and once the faults stop and a repair in progress is finished, the first uninterrupted `up` ends with every domain
serving, gated and recorded.

The simulated cluster is the Node fields the plan reads (components/gpu_failure_domain/observed.py), changed the
way the real actors change them; each transition names its source. A fixed seed and a small budget run in `make
test`; GPU_POOL_STATE_MACHINE_EXAMPLES=<n> runs longer (e.g. 2000).
"""

from __future__ import annotations

import copy
import datetime
import functools
import os
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from components.gpu_failure_domain.observed import ObservedNode
from components.gpu_failure_domain.plan import nodes_by_domain, plan_wave, settled_nodes_of
from components.gpu_failure_domain.rollout import rollout_state
from components.gpu_failure_domain.turns import Turn
from components.stack_check import validate_stack
from config.stack import StackConfig
from day2.repair.decide import refusals
from offline.runner import read_stack_file
from tests.ssh_keys import TEST_PUBLIC_KEY

DOMAINS = ("dc1", "dc2", "dc3")
NOW = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=datetime.UTC)
# What a user changes in the stack file: the driver, the RKE2 release (only forward: a downgrade is refused at
# preview, tested in test_plan.py), the sharing profile, the kernel.
DRIVERS = ("595.91.07", "580.173.02")
RKE2 = ("v1.33.5+rke2r1", "v1.33.6+rke2r1")
REPLICAS = (4, 2)
KERNELS = ("6.8.0-59-generic", "6.8.0-60-generic")


@functools.cache
def stack_for(driver: str, rke2: str, replicas: int, kernel: str) -> StackConfig:
    raw = {k.split(":", 1)[1]: v for k, v in copy.deepcopy(read_stack_file("prod")).items()}
    for domain in raw["failureDomains"]:
        domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
        domain["kernel"] = kernel
    raw["gpuOperator"]["driverVersion"] = driver
    raw["rke2"]["version"] = rke2
    raw["sharingProfiles"]["a1000-x4"]["replicas"] = replicas
    return validate_stack(raw)


@dataclass
class Cluster:
    """The Nodes as the API server holds them, and what the plan does not read but the actors do."""

    nodes: dict[str, ObservedNode]
    # The GPU Operator left the node in upgrade-failed: "out-of-sync" (its driver pod on an older revision than the
    # DaemonSet's newest) or "in-sync" (the new driver itself fails).
    upgrade_failed: dict[str, str] = field(default_factory=dict)
    # The next gate of that domain fails (a smoke test, a slot count): until the fault is cleared.
    failing_gate: set[str] = field(default_factory=set)
    clock: int = 0

    def tick(self) -> str:
        self.clock += 1
        return f"2026-12-05T12:{self.clock // 60:02d}:{self.clock % 60:02d}Z"


class Interrupted(Exception):
    """The `pulumi up` process died (Ctrl-C, a lost laptop): what ran so far stays, nothing after it runs."""


class Day2Machine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pins = {"driver": DRIVERS[0], "rke2": RKE2[0], "replicas": REPLICAS[0], "kernel": KERNELS[0]}
        self.previous = dict(self.pins)
        stack = self.stack
        settled = nodes_by_domain(stack, settled_nodes_of(stack))
        self.cluster = Cluster({name: node for name, node in settled.items() if node is not None})

    @property
    def stack(self) -> StackConfig:
        return stack_for(self.pins["driver"], self.pins["rke2"], self.pins["replicas"], self.pins["kernel"])

    @initialize()
    def settled(self) -> None:
        """Every node serving on the first stack, as its `up` leaves them (plan.settled_nodes_of)."""
        assert all(not node.out for node in self.cluster.nodes.values())

    # ------------------------------------------------------------------------------------------------ the stack

    @rule(
        what=st.sampled_from(("driver", "rke2", "replicas", "kernel", "revert")),
    )
    def change_the_stack(self, what: str) -> None:
        before = dict(self.pins)
        if what == "revert":
            # `git revert` of the last change; an RKE2 release is never pinned back below what nodes run.
            self.pins = {**self.previous, "rke2": self.pins["rke2"]}
        elif what == "rke2":
            self.pins["rke2"] = RKE2[-1]
        else:
            # A change, not a no-op: the other value of that pin.
            choices: tuple[Any, ...] = {"driver": DRIVERS, "replicas": REPLICAS, "kernel": KERNELS}[what]
            self.pins[what] = choices[1 - choices.index(self.pins[what])]
        self.previous = before

    # ------------------------------------------------------------------------------------------------ faults

    @rule(domain=st.sampled_from(DOMAINS), ready=st.booleans())
    def kubelet_stops_or_comes_back(self, domain: str, ready: bool) -> None:
        # The node lifecycle controller sets Ready Unknown when the kubelet stops posting status (kube-controller-
        # manager node_lifecycle_controller.go, tryUpdateNodeHealth); the kubelet sets it True again on its own.
        self.cluster.nodes[domain] = replace(self.cluster.nodes[domain], ready=ready)

    @rule(domain=st.sampled_from(DOMAINS), cordon=st.booleans())
    def an_admin_cordons_or_uncordons(self, domain: str, cordon: bool) -> None:
        node = self.cluster.nodes[domain]
        if node.wave_cordoned or node.held:
            return  # gpu-pool's cordon: the admin leaves it to the turn (docs/day2.md)
        self.cluster.nodes[domain] = replace(node, unschedulable=cordon)

    @rule(domain=st.sampled_from(DOMAINS), in_sync=st.booleans())
    def the_operator_marks_upgrade_failed(self, domain: str, in_sync: bool) -> None:
        # k8s-operator-libs pkg/upgrade: a failed pod eviction (pod_manager.go SchedulePodEviction) or a driver pod
        # failing (isDriverPodFailing) moves the node to upgrade-failed; common_manager.go ProcessUpgradeFailedNodes
        # leaves it only once its driver pod is in sync with the DaemonSet's newest revision (podInSyncWithDS).
        self.cluster.upgrade_failed[domain] = "in-sync" if in_sync else "out-of-sync"

    # ------------------------------------------------------------------------------------------------ pulumi up

    @rule(
        stop_after=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
        failing=st.one_of(st.none(), st.sampled_from(DOMAINS)),
    )
    def pulumi_up(self, stop_after: int | None, failing: str | None) -> None:
        """`pulumi up`, to its end, interrupted after `stop_after` steps, or with the gate of `failing` failing
        (a smoke test, a slot count) until the faults stop."""
        if failing is not None:
            self.cluster.failing_gate.add(failing)
        self.up(stop_after)

    def up(self, stop_after: int | None) -> bool:
        """True when it ran to its end."""
        stack = self.stack
        wave = plan_wave(stack, dict(self.cluster.nodes))
        if wave.problems or wave.holds:
            # Refused at preview, nothing registered (__main__.py: refuse): a repair's hold, an RKE2 skew.
            return False
        budget = [stop_after]

        def step() -> None:
            # Every step of the up, not only its end, keeps the wave's promises.
            self.never_more_domains_out_by_gpu_pools_hand_than_max_unavailable()
            self.every_node_gpu_pool_cordoned_says_why()
            if budget[0] is not None:
                if budget[0] == 0:
                    raise Interrupted
                budget[0] -= 1

        try:
            # Turns without a drain (verify) are not in a batch: they run beside the wave, each on its own node.
            for name, turn in wave.turns.items():
                if turn.kind == "verify" and not self.turn(name, turn, stack, step):
                    return False
            for batch in wave.batches:
                for name in batch:
                    if not self.turn(name, wave.turns[name], stack, step):
                        return False  # the wave stops there (node_steps_script main / wave_drain_command)
        except Interrupted:
            return False
        return True

    def turn(self, name: str, turn: Turn, stack: StackConfig, step: Any) -> bool:
        """One domain's turn as its steps change the Node (rollout.py, node_steps_script.py); False: it stopped."""
        nodes = self.cluster.nodes
        domain = next(d for d in stack.failure_domains if d.name == name)
        node = nodes[name]
        if turn.drains:
            step()
            # take_hold_command: a repair at work (or stopped mid-repair) keeps the node; plan_wave refused that.
            assert node.holder_kind != "repair", f"{name}: the wave reached a node a repair holds"
            node = replace(node, turn_state="draining", turn_holder=f"up:prod since {self.cluster.tick()}")
            if not node.ready:
                # wave_drain_command: no drain against an unreachable kubelet; the node says how to go on.
                nodes[name] = replace(node, turn_state="stopped", wave_stopped="not Ready: gpu-pool repair or wait")
                return False
            # The cordon and the turn's start in one patch; the wave's mark only where it cordoned the node.
            node = replace(
                node,
                unschedulable=True,
                wave_cordoned=node.wave_cordoned or (None if node.unschedulable else name),
                wave_turn=self.cluster.tick(),
            )
            nodes[name] = node
            step()
            # kubectl drain (PodDisruptionBudgets respected); the operator is held off by the skip label until here.
            nodes[name] = node = replace(node, turn_state="changing")
        step()
        # The change: the RKE2 installer and agent restart, the kernel install, the operator's driver upgrade.
        if turn.install_rke2:
            node = replace(node, kubelet_version=stack.rke2.version)
        if turn.install_kernel:
            node = replace(node, kernel_version=domain.kernel)
        nodes[name] = node
        step()
        # The gate (node_steps_script step_gpu_ready): an out-of-sync driver pod in upgrade-failed is deleted and
        # the node recovers; an in-sync one, a failing check or a node not Ready stops the wave here.
        if self.cluster.upgrade_failed.get(name) == "out-of-sync":
            del self.cluster.upgrade_failed[name]
        failed = (
            name in self.cluster.failing_gate or self.cluster.upgrade_failed.get(name) == "in-sync" or not node.ready
        )
        if failed:
            nodes[name] = replace(
                node, turn_state="stopped" if turn.drains else node.turn_state, wave_stopped="gate gpu-ready failed"
            )
            return False
        step()
        # rollout_done_command: record, end the turn, uncordon only what the wave cordoned, state done: one patch.
        ours = bool(node.wave_cordoned)
        nodes[name] = replace(
            node,
            rollout=rollout_state(domain, stack),
            wave_turn=None,
            wave_stopped=None,
            wave_cordoned=None,
            unschedulable=node.unschedulable and not ours,
            turn_state="done",
        )
        return True

    # ------------------------------------------------------------------------------------------------ repairs

    @rule(domain=st.sampled_from(DOMAINS))
    def gpu_pool_repair_starts(self, domain: str) -> None:
        """`gpu-pool repair NODE --yes` on a node whose card faulted: its guard rails (day2/repair/decide.py refusals,
        the real function), then its drain takes the hold (rollout.take_hold_command)."""
        stack = self.stack
        config = next(d for d in stack.failure_domains if d.name == domain)
        node = self.cluster.nodes[domain]
        if refusals(stack, config, dict(self.cluster.nodes), NOW):
            return  # exit 2, nothing changed
        if node.held and node.holder_kind == "repair":
            return  # the same repair again is gpu_pool_repair_finishes
        if not node.ready:
            return  # its drain stops before it changes anything (wave_drain_command)
        self.cluster.nodes[domain] = replace(
            node,
            unschedulable=True,
            wave_cordoned=node.wave_cordoned or (None if node.unschedulable else domain),
            wave_turn=node.wave_turn or self.cluster.tick(),
            turn_state="repairing",
            turn_holder=f"repair:alice@laptop since {self.cluster.tick()}",
        )

    @rule(domain=st.sampled_from(DOMAINS), stops=st.booleans())
    def gpu_pool_repair_finishes(self, domain: str, stops: bool) -> None:
        """The repair's power cycle, checks and end (node_steps_script step_repair_done), or a stop on the way
        (repair_run._record_stop: still the repair's hold, `stopped`)."""
        node = self.cluster.nodes[domain]
        if node.holder_kind != "repair":
            return
        if stops:
            self.cluster.nodes[domain] = replace(node, turn_state="stopped", wave_stopped="repair stopped at gpu-ready")
            return
        ours = bool(node.wave_cordoned)
        self.cluster.nodes[domain] = replace(
            node,
            ready=True,
            wave_turn=None,
            wave_stopped=None,
            wave_cordoned=None,
            unschedulable=node.unschedulable and not ours,
            turn_state="done",
        )

    # ------------------------------------------------------------------------------------------------ the end

    @rule()
    def faults_stop_then_an_uninterrupted_up_converges(self) -> None:
        """The faults stop (the kubelets report, admins uncordon, a real driver failure is fixed, repairs in
        progress are finished): the first uninterrupted `up` ends with every domain serving, gated, recorded."""
        cluster = self.cluster
        cluster.failing_gate.clear()
        cluster.upgrade_failed.clear()
        for name in DOMAINS:
            if cluster.nodes[name].holder_kind == "repair":
                self.gpu_pool_repair_finishes(name, stops=False)
            node = cluster.nodes[name]
            cluster.nodes[name] = replace(
                node, ready=True, unschedulable=node.unschedulable and bool(node.wave_cordoned)
            )

        assert self.up(None), plan_wave(self.stack, dict(cluster.nodes)).problems
        stack = self.stack
        for domain in stack.failure_domains:
            node = cluster.nodes[domain.name]
            assert not node.unschedulable and not node.turn_in_progress, (domain.name, node)
            assert node.rollout == rollout_state(domain, stack), domain.name
            assert node.turn_state in ("", "done")
        assert all(turn.kind == "none" for turn in plan_wave(stack, dict(cluster.nodes)).turns.values())

    # ------------------------------------------------------------------------------------------------ invariants

    @invariant()
    def never_more_domains_out_by_gpu_pools_hand_than_max_unavailable(self) -> None:
        # Out by gpu-pool's hand: a turn (a wave's or a repair's) drained it and has not ended. A turn that stopped
        # before its drain (the node not Ready) took nothing out: the kubelet did.
        ours = [name for name, node in self.cluster.nodes.items() if node.turn_in_progress]
        assert len(ours) <= self.stack.rollout.max_unavailable, ours

    @invariant()
    def every_node_gpu_pool_cordoned_says_why(self) -> None:
        for name, node in self.cluster.nodes.items():
            if node.unschedulable and node.wave_cordoned:
                assert node.wave_stopped or (node.held and node.turn_holder), (name, node)


EXAMPLES = int(os.environ.get("GPU_POOL_STATE_MACHINE_EXAMPLES", "40"))
# derandomize: the same sequences on every run of `make test` (a fixed seed); the env var runs a longer search.
Day2Machine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=40,
    derandomize="GPU_POOL_STATE_MACHINE_EXAMPLES" not in os.environ,
    deadline=None,
)
TestDay2AgainstAdversity = Day2Machine.TestCase
