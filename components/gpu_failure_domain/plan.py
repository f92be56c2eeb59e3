"""A domain's plan as data: every resource of a GpuFailureDomain as a step, in the order they run, with what each
runs, its triggers, what it waits for and one line saying what it does.

`plan_domain` is a pure function of the domain's config, the stack and its turn (turns.py: what the observed
Node asks for); `GpuFailureDomain` only registers the steps. So the order of a domain's steps, and which steps
wait for the previous batch of the wave, are tested as plain data for every change and every observed state
(tests/gpu_failure_domain/test_plan.py). This is also the one module `offline/` reads the plan through.

A step's name is the resource's name after the domain's (`dc1-wave-drain`): the names are part of the users'
state (URNs), so they never change. A turn's steps (drain, logins, upgrades, restarts, the wave gate) exist only
in the `up` that runs them; the next `up` deletes them, which runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from components.gpu_failure_domain.kernel_upgrade import (
    install_kernel_command,
    login_check_command,
    unchanged_kernel_command,
)
from components.gpu_failure_domain.node_metadata import node_labels, taint_command, untaint_command
from components.gpu_failure_domain.node_steps import (
    INTERPRETER,
    gpu_ready_environment,
    node_steps_script,
    power_cycle_environment,
    step_environment,
)
from components.gpu_failure_domain.observed import (
    NODES_ENV,
    WAVE_STOPPED_ANNOTATION,
    ObservedNode,
    nodes_by_domain,
    settled_nodes,
)
from components.gpu_failure_domain.proxmox_vm import mapped_indexes
from components.gpu_failure_domain.rollout import (
    CHANGE_WORDS,
    device_plugin_restart_command,
    node_cleanup_command,
    retire_drain_command,
    rke2_upgrade_command,
    rollout_done_command,
    rollout_state,
    wave_drain_command,
)
from components.gpu_failure_domain.smoke_test import build_smoke_job, smoke_device, validated_stack
from components.gpu_failure_domain.turns import (
    CapacityPoint,
    Turn,
    Wave,
    plan_wave,
    repair_turn,
    turn_for,
    wave_order,
)
from components.shared.kubectl import kubectl_argv, kubectl_prefix
from components.shared.node_marking import GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig

__all__ = [
    "CHANGE_WORDS",
    "NODES_ENV",
    "NODE_READY_MINUTES",
    "CapacityPoint",
    "Command",
    "DomainPlan",
    "ObservedNode",
    "Step",
    "StepName",
    "Turn",
    "Wave",
    "nodes_by_domain",
    "plan_domain",
    "plan_wave",
    "repair_turn",
    "settled_nodes_of",
    "turn_for",
    "wave_export",
    "wave_order",
]

# How long a node may take to register and be Ready after its VM is created (cloud-init, RKE2 install).
NODE_READY_MINUTES = 30
SHELL = ("/bin/sh", "-c")
# How long a repair's last step may take (one patch and an Event).
REPAIR_DONE_MINUTES = 5
# How long a repaired smoke Job is kept once finished: doctor's smoke floor reads the newest, then the stack's.
REPAIR_JOB_TTL_SECONDS = 7 * 24 * 3600

Kind = Literal["pci-mapping", "cloud-init", "vm", "node-labels", "smoke-test", "local", "remote"]
# What a step may wait for on the cluster-wide platform (components/shared/platform_handles.py).
PlatformWait = Literal["time-slicing-config", "operator", "smoke-namespace", "steering-policy"]


class StepName(StrEnum):
    """Every step's name, declared once: the resource is `<domain>-<name>` (a URN in users' state: never renamed),
    and `make diff` and the tests read them from here."""

    PCI_MAPPING = "pci-mapping"
    CLOUD_INIT = "cloud-init"
    NODE_CLEANUP = "node-cleanup"
    VM = "vm"
    RETIRE = "retire"
    RKE2_LOGIN = "rke2-login"
    KERNEL_LOGIN = "kernel-login"
    WAVE_DRAIN = "wave-drain"
    KERNEL_DRAIN = "kernel-drain"
    RKE2_UPGRADE = "rke2-upgrade"
    PLUGIN_RESTART = "device-plugin-restart"
    POWER_CYCLE = "power-cycle"
    NODE_READY = "node-ready"
    NODE_LABELS = "node-labels"
    NODE_TAINT = "node-taint"
    KERNEL_INSTALL = "kernel-install"
    KERNEL_REBUILD = "kernel-driver-rebuild"
    # A repair's check of the node after its power cycle (over SSH).
    NODE_CHECK = "node-check"
    GPU_READY = "gpu-ready"
    SMOKE_TEST = "cuda-smoke-test"
    WAVE_GATE = "wave-gate"
    ROLLOUT = "rollout"


@dataclass(frozen=True)
class Command:
    """What a `local` or `remote` step runs (pulumi-command): create, update and delete, and what reruns it."""

    create: str
    # None: pulumi-command runs `create` again on an update ("If empty, the create command will be executed
    # instead", provider/pkg/provider/{local,remote}/commandController.go Update, v1.2.1). A step whose update is
    # its create leaves it unset: the node-steps script is 31 KB, and sending it twice per step made a third of
    # every preview's bytes, each copy kept twice more in the state (docs/engine.md).
    update: str | None = None
    delete: str | None = None
    interpreter: tuple[str, ...] | None = SHELL
    environment: Mapping[str, str] = field(default_factory=dict)
    # The Proxmox credential (a secret Output) joins the environment at registration.
    proxmox_credentials: bool = False
    triggers: tuple[str, ...] = ()
    # Steps whose resource id is a trigger too (node-ready runs again for a new VM).
    id_triggers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    name: str
    kind: Kind
    does: str
    waits_for: tuple[str, ...] = ()
    platform: tuple[PlatformWait, ...] = ()
    # Waits for the previous batch of the wave (its domains' `rollout` steps).
    after_previous_batch: bool = False
    command: Command | None = None
    # pci-mapping: the card's index; smoke-test: the Job.
    card: int = 0
    manifest: Mapping[str, Any] | None = None
    delete_before_replace: bool = False
    # Part of the turn: registered only in the `up` that runs it.
    turn_step: bool = False


@dataclass(frozen=True)
class DomainPlan:
    domain: str
    turn: Turn
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        return next(step for step in self.steps if step.name == name)

    @property
    def names(self) -> list[str]:
        return [step.name for step in self.steps]

    def turn_steps(self) -> list[Step]:
        """The steps of this domain's turn in the order they run (what `make diff` lists under Wave)."""
        kept = {StepName.POWER_CYCLE, StepName.NODE_READY, StepName.GPU_READY, StepName.ROLLOUT}
        if not self.turn.gated:
            kept = set()
        return [s for s in self.steps if s.turn_step or s.name in kept or s.name.startswith(StepName.SMOKE_TEST)]


def _first_install_kernel(domain: FailureDomainConfig, kubectl: str, after: tuple[str, ...]) -> list[Step]:
    """A kernel pin on a node with no Node yet (or with the cluster not read): its own drain, no wave. Every
    step is triggered by the pin alone; any other change to one runs its `update`, which does nothing."""
    assert domain.kernel is not None
    unchanged = unchanged_kernel_command(domain.kernel)
    triggers = (domain.kernel,)
    return [
        Step(
            StepName.KERNEL_LOGIN,
            "remote",
            "prove the SSH login and passwordless sudo the kernel install needs",
            waits_for=after,
            command=Command(login_check_command(), update=unchanged, interpreter=None, triggers=triggers),
        ),
        Step(
            StepName.KERNEL_DRAIN,
            "local",
            "cordon (marked as the wave's) and drain",
            waits_for=(*after, StepName.KERNEL_LOGIN),
            command=Command(
                wave_drain_command(domain.hostname, kubectl, domain.name), update=unchanged, triggers=triggers
            ),
        ),
    ]


def _kernel_install(
    domain: FailureDomainConfig, after: tuple[str, ...], triggers: tuple[str, ...], *, turn: bool
) -> Step:
    assert domain.kernel is not None
    return Step(
        StepName.KERNEL_INSTALL,
        "remote",
        f"install and hold kernel {domain.kernel}, reboot into it",
        waits_for=after,
        command=Command(
            install_kernel_command(domain.kernel),
            update=unchanged_kernel_command(domain.kernel),
            interpreter=None,
            triggers=triggers,
        ),
        turn_step=turn,
    )


def _kernel_rebuild(
    domain: FailureDomainConfig,
    stack: StackConfig,
    kubectl: list[str],
    after: tuple[str, ...],
    triggers: tuple[str, ...],
    *,
    turn: bool,
) -> Step:
    assert domain.kernel is not None
    return Step(
        StepName.KERNEL_REBUILD,
        "local",
        f"wait for the node on kernel {domain.kernel}, then rebuild its driver",
        waits_for=after,
        command=Command(
            node_steps_script(),
            update=unchanged_kernel_command(domain.kernel),
            interpreter=tuple(INTERPRETER),
            environment=step_environment(
                "kernel-rebuild",
                domain.hostname,
                kubectl,
                NODE_READY_MINUTES,
                KERNEL=domain.kernel,
                OPERATOR_NAMESPACE=stack.gpu_operator.namespace,
            ),
            triggers=triggers,
        ),
        turn_step=turn,
    )


def plan_domain(
    domain: FailureDomainConfig, stack: StackConfig, turn: Turn, node_check: Command | None = None
) -> DomainPlan:
    """Every step of the domain, in an order they can run in, for this `up`'s turn.

    A repair turn (turns.repair_turn) power-cycles the VM whatever is pending, checks the node again with
    `node_check` where `gpu-pool repair` can run node-check on it (over SSH: day2 builds that command), runs the
    smoke test again under a new Job name and ends with the repair's record instead of a rollout record."""
    repair = turn.kind == "repair"
    kubectl = kubectl_prefix(stack.kubernetes.kubeconfig, stack.kubernetes.context)
    kubectl_args = kubectl_argv(stack.kubernetes.kubeconfig, stack.kubernetes.context)
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    host = domain.hostname
    script = node_steps_script()
    steps: list[Step] = []

    mappings = tuple(
        StepName.PCI_MAPPING if index == 0 else f"{StepName.PCI_MAPPING}-{index}" for index in mapped_indexes(domain)
    )
    steps += [
        Step(name, "pci-mapping", "the Proxmox PCI resource mapping of a card", card=index)
        for name, index in zip(mappings, mapped_indexes(domain), strict=True)
    ]
    steps.append(Step(StepName.CLOUD_INIT, "cloud-init", "the VM's first-boot user data (a snippet)"))
    # Deletes run dependents first: the VM depends on this step, so a removed domain's VM goes first and then
    # this step's delete removes the Node object the VM left behind (nothing else would).
    steps.append(
        Step(
            StepName.NODE_CLEANUP,
            "local",
            "on removal, after the VM: delete the Node object",
            command=Command(
                f"echo {shlex.quote(f'node {host} is removed with its VM')}", delete=node_cleanup_command(host, kubectl)
            ),
        )
    )
    steps.append(
        Step(StepName.VM, "vm", "the GPU worker VM", waits_for=(*mappings, StepName.CLOUD_INIT, StepName.NODE_CLEANUP))
    )
    # And this one depends on the VM, so its delete runs before the VM's (which stops it): a removed domain, protected
    # or not, is drained first. No trigger on the VM's id: a replaced VM must not drain the new node by name.
    steps.append(
        Step(
            StepName.RETIRE,
            "local",
            "on removal, before the VM stops: drain the node",
            waits_for=(StepName.VM,),
            command=Command(
                f"echo {shlex.quote(f'{host} is drained before its VM stops when it is removed')}",
                delete=retire_drain_command(host, kubectl),
            ),
        )
    )

    # The turn: what drains, changes and gates this domain in this `up`.
    key = (turn.key,)
    logins: list[str] = []
    if turn.install_rke2:
        logins.append(StepName.RKE2_LOGIN)
        steps.append(
            Step(
                StepName.RKE2_LOGIN,
                "remote",
                "prove the SSH login the RKE2 upgrade needs, before the drain",
                waits_for=(StepName.VM,),
                after_previous_batch=True,
                command=Command(login_check_command(), interpreter=None, triggers=key),
                turn_step=True,
            )
        )
    if turn.drains and turn.install_kernel:
        logins.append(StepName.KERNEL_LOGIN)
        steps.append(
            Step(
                StepName.KERNEL_LOGIN,
                "remote",
                "prove the SSH login and passwordless sudo the kernel install needs, before the drain",
                waits_for=(StepName.VM,),
                after_previous_batch=True,
                command=Command(login_check_command(), interpreter=None, triggers=key),
                turn_step=True,
            )
        )
    changed: list[str] = []
    if turn.drains:
        steps.append(
            Step(
                StepName.WAVE_DRAIN,
                "local",
                "cordon (marked as the wave's) and drain",
                waits_for=(StepName.VM, *logins),
                # The operator's new release first: with no upgrade slots of its own (driver.upgradePolicy), it
                # upgrades the driver of every cordoned node; the drain holds it off this one until it is done.
                platform=("operator",),
                after_previous_batch=True,
                command=Command(wave_drain_command(host, kubectl, domain.name), triggers=key),
                turn_step=True,
            )
        )
        changed.append(StepName.WAVE_DRAIN)
    if turn.install_rke2:
        steps.append(
            Step(
                StepName.RKE2_UPGRADE,
                "remote",
                f"install RKE2 {stack.rke2.version} and restart rke2-agent",
                waits_for=(StepName.WAVE_DRAIN,),
                command=Command(rke2_upgrade_command(stack.rke2.version), interpreter=None, triggers=key),
                turn_step=True,
            )
        )
        changed.append(StepName.RKE2_UPGRADE)
    if turn.restart_plugins:
        steps.append(
            Step(
                StepName.PLUGIN_RESTART,
                "local",
                "restart the device plugin and GPU Feature Discovery on the new profile",
                waits_for=(StepName.WAVE_DRAIN,),
                platform=("time-slicing-config",),
                command=Command(
                    device_plugin_restart_command(host, kubectl, stack.gpu_operator.namespace), triggers=key
                ),
                turn_step=True,
            )
        )
        changed.append(StepName.PLUGIN_RESTART)

    steps.append(
        Step(
            StepName.POWER_CYCLE,
            "local",
            f"stop and start VM {domain.vm_id} on {domain.proxmox_node} through the Proxmox API (recorded on the Node)"
            if repair
            else "power-cycle the VM if Proxmox has a change pending or the card moved (drained first)",
            waits_for=(StepName.VM, *changed),
            command=Command(
                script,
                interpreter=tuple(INTERPRETER),
                environment=power_cycle_environment(
                    domain, stack.proxmox, kubectl_args, NODE_READY_MINUTES, forced=turn.reason if repair else None
                ),
                proxmox_credentials=True,
            ),
        )
    )
    steps.append(
        Step(
            StepName.NODE_READY,
            "local",
            "wait for the node to register and be Ready",
            waits_for=(StepName.POWER_CYCLE,),
            command=Command(
                script,
                interpreter=tuple(INTERPRETER),
                environment=step_environment("node-ready", host, kubectl_args, NODE_READY_MINUTES),
                triggers=(host,),
                id_triggers=(StepName.VM,),
            ),
        )
    )
    checked: tuple[str, ...] = ()
    if repair and node_check is not None:
        steps.append(
            Step(
                StepName.NODE_CHECK,
                "remote",
                "node-check on the node again: the card on the bus, the driver, NVML, no new Xid",
                waits_for=(StepName.NODE_READY,),
                command=node_check,
                turn_step=True,
            )
        )
        checked = (StepName.NODE_CHECK,)
    steps.append(
        Step(
            StepName.NODE_LABELS,
            "node-labels",
            "label the node (GPU pool, zone, sharing profile)",
            # The profile the label names must exist first, or that node's device plugin loses its card.
            waits_for=(StepName.NODE_READY, *changed),
            platform=("time-slicing-config",),
            manifest={
                "name": host,
                "labels": node_labels(domain, marking),
                # RKE2 registered these labels under its own field manager; take them over so a changed
                # sharing profile converges instead of failing on an apply conflict.
                "annotations": {"pulumi.com/patchForce": "true"},
            },
        )
    )
    steps.append(
        Step(
            StepName.NODE_TAINT,
            "local",
            "taint the node so only GPU pods land on it",
            waits_for=(StepName.NODE_READY,),
            command=Command(
                taint_command(host, kubectl, marking),
                delete=untaint_command(host, kubectl, marking),
                triggers=(host, marking.taint),
            ),
            # Delete first: the old step's delete removes the taint by key, which would undo the new one.
            delete_before_replace=True,
        )
    )
    ready: tuple[str, ...] = (StepName.NODE_LABELS, StepName.NODE_TAINT, *changed, *checked)

    if domain.kernel is not None and turn.kind == "first-install":
        steps += _first_install_kernel(domain, kubectl, ready)
        steps.append(_kernel_install(domain, (StepName.KERNEL_DRAIN,), (domain.kernel,), turn=False))
        steps.append(
            _kernel_rebuild(domain, stack, kubectl_args, (StepName.KERNEL_INSTALL,), (domain.kernel,), turn=False)
        )
        ready = (StepName.KERNEL_REBUILD,)
    elif turn.drains and turn.rebuild_driver:
        if turn.install_kernel:
            steps.append(_kernel_install(domain, ready, key, turn=True))
            ready = (StepName.KERNEL_INSTALL,)
        steps.append(_kernel_rebuild(domain, stack, kubectl_args, ready, key, turn=True))
        ready = (StepName.KERNEL_REBUILD,)

    last: tuple[str, ...] = ready
    if stack.smoke_test.enabled:
        validated = [
            validated_stack(
                chart_version=stack.gpu_operator.chart_version,
                driver_version=stack.gpu_operator.driver_version,
                node=host,
                device=smoke_device(domain, card),
                image=stack.smoke_test.image,
                kernel=domain.kernel,
            )
            for card in _smoke_cards(domain)
        ]
        several = len(domain.cards) > 1
        jobs = [
            build_smoke_job(
                domain.name,
                stack.smoke_test,
                checks,
                toleration=None if stack.kyverno.enabled else marking.toleration,
                card=card if several else None,
                gpus=stack.slots(domain) if several else 1,
            )
            for card, checks in zip(_smoke_cards(domain), validated, strict=True)
        ]
        # The Jobs start only once the node advertises every card's slots on the pinned driver: the first driver
        # build and the driver upgrade happen here, not inside a Job's deadline. SMOKE_JOB makes the gate run
        # again whenever a Job does (a new name: what it validates changed).
        steps.append(
            Step(
                StepName.GPU_READY,
                "local",
                "wait for its GPU slots on the pinned driver",
                waits_for=ready,
                platform=("operator",),
                command=Command(
                    script,
                    interpreter=tuple(INTERPRETER),
                    environment=gpu_ready_environment(
                        domain,
                        stack,
                        kubectl_args,
                        SMOKE_JOB=",".join(job["metadata"]["name"] for job in jobs)
                        if len(jobs) > 1
                        else jobs[0]["metadata"]["name"],
                    ),
                ),
            )
        )
        previous: str = StepName.GPU_READY
        for card, job in zip(_smoke_cards(domain), jobs, strict=True):
            name = StepName.SMOKE_TEST if card == 0 else f"{StepName.SMOKE_TEST}-{card}"
            on_card = f" on card {card}" if len(jobs) > 1 else ""
            # One card's Job at a time: each holds every slot of the node so that it can pick its card.
            if repair:
                again = _repair_job(job, turn)
                steps.append(
                    Step(
                        name,
                        "local",
                        f"CUDA smoke test{on_card} again, as Job {again['metadata']['name']}",
                        waits_for=(previous,),
                        command=Command(
                            script,
                            interpreter=tuple(INTERPRETER),
                            environment=step_environment(
                                "smoke-test",
                                host,
                                kubectl_args,
                                max(1, -(-(stack.smoke_test.timeout_seconds + 600) // 60)),
                                SMOKE_JOB=json.dumps(again, sort_keys=True),
                            ),
                        ),
                        manifest=again,
                    )
                )
            else:
                steps.append(
                    Step(
                        name,
                        "smoke-test",
                        "CUDA smoke test" + on_card,
                        waits_for=(previous,),
                        platform=("smoke-namespace", "steering-policy"),
                        manifest=job,
                        delete_before_replace=True,
                    )
                )
            previous = name
        last = (previous,)

    if turn.gated:
        steps.append(
            Step(
                StepName.WAVE_GATE,
                "local",
                "gate: Ready at the pinned kubelet, slots on the pinned driver",
                waits_for=(*last, *(name for name in changed if name not in last)),
                platform=("operator",),
                command=Command(
                    script,
                    interpreter=tuple(INTERPRETER),
                    environment=gpu_ready_environment(
                        domain,
                        stack,
                        kubectl_args,
                        KUBELET_VERSION=stack.rke2.version,
                        WAVE_DOMAIN=domain.name,
                        WAVE_STOPPED_ANNOTATION=WAVE_STOPPED_ANNOTATION,
                    ),
                    triggers=key,
                ),
                turn_step=True,
            )
        )
        last = (StepName.WAVE_GATE,)

    if repair:
        steps.append(
            Step(
                StepName.ROLLOUT,
                "local",
                "record the repair on the Node and as an Event, end the turn"
                + (", uncordon" if turn.uncordons else "; the node stays cordoned (cordoned by someone else)"),
                waits_for=last,
                command=Command(
                    script,
                    interpreter=tuple(INTERPRETER),
                    environment=step_environment(
                        "repair-done", host, kubectl_args, REPAIR_DONE_MINUTES, REPAIR_REASON=turn.reason
                    ),
                ),
            )
        )
        return DomainPlan(domain.name, turn, tuple(steps))

    state = rollout_state(domain, stack)
    done = rollout_done_command(host, kubectl, state)
    steps.append(
        Step(
            StepName.ROLLOUT,
            "local",
            "record the rollout"
            + (
                ", uncordon"
                if turn.uncordons
                else "; the node stays cordoned (cordoned by someone else before the wave)"
            )
            if turn.gated
            else "record what the node runs",
            waits_for=last,
            # A resumed turn may end in a state equal to the last one recorded (a change reverted): the attempt's
            # token makes the step run anyway, so the node it cordoned is uncordoned after its gate.
            command=Command(
                done,
                environment={"GPU_POOL_RESUMED_TURN": turn.resume_token} if turn.resume_token else {},
            ),
        )
    )
    return DomainPlan(domain.name, turn, tuple(steps))


def _smoke_cards(domain: FailureDomainConfig) -> list[int]:
    return list(range(len(domain.cards)))


def _repair_job(job: Mapping[str, Any], turn: Turn) -> dict[str, Any]:
    """The domain's smoke Job under a name of this repair's own (the stack's Job of that name completed long
    ago), labelled as the stack's so that doctor's smoke floor reads it as the newest, and kept a week."""
    again: dict[str, Any] = json.loads(json.dumps(job))
    digest = hashlib.sha256(turn.key.encode()).hexdigest()[:6]
    again["metadata"]["name"] = f"{job['metadata']['name']}-repair-{digest}"
    again["metadata"]["annotations"] = {
        key: value for key, value in again["metadata"]["annotations"].items() if not key.startswith("pulumi.com/")
    } | {"gpu-pool/repair": turn.reason[:256]}
    again["spec"]["ttlSecondsAfterFinished"] = REPAIR_JOB_TTL_SECONDS
    return again


def settled_nodes_of(stack: StackConfig) -> dict[str, Any]:
    """The Nodes a stack's `up` leaves (`kubectl get nodes -o json`'s shape): what `make diff` assumes without
    NODES=, and writes as nodes.json."""
    return settled_nodes(stack, {d.name: rollout_state(d, stack) for d in stack.failure_domains})


def wave_export(wave: Wave, plans: Mapping[str, DomainPlan], source: str) -> dict[str, Any]:
    """The `wave` stack output: the batches, each domain's turn and its steps, the capacity timeline, the dangers."""
    return {
        "order": wave.batches,
        "changes": wave.changes,
        "from": source,
        "domains": {
            name: {
                "turn": plan.turn.kind,
                "situation": plan.turn.situation,
                "why": plan.turn.why(),
                "steps": [{"name": step.name, "description": step.does} for step in plan.turn_steps()],
            }
            for name, plan in plans.items()
            if plan.turn.gated
        },
        "capacity": [point.as_json() for point in wave.capacity],
        "dangers": wave.dangers,
    }
