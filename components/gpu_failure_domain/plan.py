"""A domain's plan as data: every resource of a GpuFailureDomain as a step, in the order they run, with what each
runs, its triggers, what it waits for and one line saying what it does.

`plan_domain` is a pure function of the domain's config, the stack and its turn (turns.py: what the observed
Node asks for), composed of one small builder per phase of a domain's life (identity, the turn's entry, the node,
its kernel, the smoke test, the end). Each step carries everything about its resource (arguments and options,
steps.py), so `GpuFailureDomain` only registers the steps. So the order of a domain's steps, and which steps
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from components.gpu_failure_domain.cloud_init import build_user_data, proxy_secret_files
from components.gpu_failure_domain.kernel_upgrade import (
    install_kernel_command,
    login_check_command,
    unchanged_kernel_command,
    unchanged_kernel_script,
)
from components.gpu_failure_domain.node_metadata import node_labels, ssh_host, taint_command, untaint_command
from components.gpu_failure_domain.node_steps import (
    INTERPRETER,
    drain_environment,
    gpu_ready_environment,
    node_steps_script,
    power_cycle_environment,
    rollout_environment,
    step_environment,
)
from components.gpu_failure_domain.observed import (
    NODES_ENV,
    ObservedNode,
    nodes_by_domain,
)
from components.gpu_failure_domain.proxmox_vm import mapped_indexes, pci_mapping_args, snippet_file_name, vm_args
from components.gpu_failure_domain.registries import registry_files, secret_files_payload
from components.gpu_failure_domain.rollout import (
    CHANGE_WORDS,
    apt_mirror_check_command,
    archive_sources,
    device_plugin_restart_command,
    domain_egress_files,
    node_cleanup_command,
    node_files_command,
    retire_drain_command,
    rke2_upgrade_command,
    rollout_state,
)
from components.gpu_failure_domain.settled import settled_nodes
from components.gpu_failure_domain.smoke_test import build_smoke_job, smoke_device, validated_stack
from components.gpu_failure_domain.steps import (
    CloudInitStep,
    Command,
    CommandStep,
    LocalStep,
    NodeLabelsStep,
    Options,
    PciMappingStep,
    PlatformWait,
    RemoteStep,
    RepairSmokeStep,
    ScriptStep,
    SmokeJobStep,
    Step,
    StepName,
    VmStep,
)
from components.gpu_failure_domain.turns import (
    CapacityPoint,
    Turn,
    Wave,
    legacy_template_changes,
    plan_wave,
    records_version_only,
    repair_turn,
    turn_for,
    wave_order,
)
from components.shared.kubectl import kubectl_argv, kubectl_prefix
from components.shared.node_marking import GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.proxy import proxy_environment, subnet_of
from config.smoke_test import SmokeTestConfig
from config.stack import StackConfig

__all__ = [
    "CHANGE_WORDS",
    "NODES_ENV",
    "NODE_READY_MINUTES",
    "CapacityPoint",
    "Command",
    "CommandStep",
    "DomainPlan",
    "ObservedNode",
    "PlatformWait",
    "ScriptStep",
    "Step",
    "StepName",
    "Turn",
    "Wave",
    "nodes_by_domain",
    "plan_domain",
    "plan_wave",
    "repair_turn",
    "settled_nodes_of",
    "smoke_budget_seconds",
    "turn_for",
    "version_only_note",
    "wave_export",
    "wave_order",
]

# How long a node may take to register and be Ready after its VM is created (cloud-init, RKE2 install).
NODE_READY_MINUTES = 30
# How long a repair's last step may take (one patch and an Event).
REPAIR_DONE_MINUTES = 5
# How long a repaired smoke Job is kept once finished: doctor's smoke floor reads the newest, then the stack's.
REPAIR_JOB_TTL_SECONDS = 7 * 24 * 3600
# The image pull comes on top of the smoke test's own run (`smokeTest.timeoutSeconds`): the CUDA sample's image
# is pulled on a node that has never run it.
IMAGE_PULL_SECONDS = 600
# bpg gives a disk's `speed` block a DefaultFunc of all-zero limits, which the bridge applies to the inputs, but
# reads a disk without limits back as no block (proxmoxtf/resource/vm/disk/schema.go mkDiskSpeed and disk.go
# Read, v0.111.1): every preview then showed an update of every VM (`disks[0].speed`), seen under the real
# engine. The program sets no limits, so the block is left to Proxmox.
VM_IGNORED = ("disks[0].speed",)

S = TypeVar("S", bound=Step)


def smoke_budget_seconds(smoke: SmokeTestConfig) -> int:
    """How long a smoke Job may take from its creation: its run and the image pull."""
    return smoke.timeout_seconds + IMAGE_PULL_SECONDS


@dataclass(frozen=True)
class DomainPlan:
    domain: str
    turn: Turn
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        return next(step for step in self.steps if step.name == name)

    def step_of(self, name: str, kind: type[S]) -> S:
        """The step of that name, known to be of that kind (a reader that needs its kind's fields)."""
        step = self.step(name)
        if not isinstance(step, kind):
            raise TypeError(f"step {name} is a {step.kind} step, not a {kind.__name__}")
        return step

    @property
    def names(self) -> list[str]:
        return [step.name for step in self.steps]

    def turn_steps(self) -> list[Step]:
        """The steps of this domain's turn in the order they run (what `make diff` lists under Wave)."""
        kept = {StepName.POWER_CYCLE, StepName.NODE_READY, StepName.GPU_READY, StepName.ROLLOUT}
        if not self.turn.gated:
            kept = set()
        return [s for s in self.steps if s.turn_step or s.name in kept or s.name.startswith(StepName.SMOKE_TEST)]


@dataclass(frozen=True)
class _Scope:
    """What every phase reads: the domain, the stack, this `up`'s turn, and what is derived from them once."""

    domain: FailureDomainConfig
    stack: StackConfig
    turn: Turn
    # kubectl as a shell prefix (the commands) and as an argv (the node-steps script's KUBECTL).
    kubectl: str
    kubectl_args: list[str]
    marking: GpuNodeMarking
    script: str
    holder: str = "up"

    @classmethod
    def of(cls, domain: FailureDomainConfig, stack: StackConfig, turn: Turn, holder: str = "up") -> _Scope:
        kubernetes = stack.kubernetes
        return cls(
            domain,
            stack,
            turn,
            kubectl_prefix(kubernetes.kubeconfig, kubernetes.context),
            kubectl_argv(kubernetes.kubeconfig, kubernetes.context),
            GpuNodeMarking.from_kyverno(stack.kyverno),
            node_steps_script(),
            holder,
        )

    @property
    def host(self) -> str:
        return self.domain.hostname

    @property
    def repair(self) -> bool:
        return self.turn.kind == "repair"

    @property
    def key(self) -> tuple[str, ...]:
        """Every step of a turn is triggered by the turn's key: where the node comes from, what it goes to."""
        return (self.turn.key,)


def plan_domain(
    domain: FailureDomainConfig,
    stack: StackConfig,
    turn: Turn,
    node_check: Command | None = None,
    holder: str = "up",
) -> DomainPlan:
    """Every step of the domain, in an order they can run in, for this `up`'s turn: each phase waits for the last
    steps of the phases before it.

    A repair turn (turns.repair_turn) power-cycles the VM whatever is pending, checks the node again with
    `node_check` where `gpu-pool repair` can run node-check on it (over SSH: day2 builds that command), runs the
    smoke test again under a new Job name and ends with the repair's record instead of a rollout record.

    `holder` names who takes the node's hold when the turn starts (observed.TURN_HOLDER_ANNOTATION): `up:<stack>`
    for `pulumi up`, `repair:<user>@<host>` for `gpu-pool repair`."""
    at = _Scope.of(domain, stack, turn, holder)
    identity = _identity(at)
    logins = _logins(at)
    files = _files(at)
    changes = [*_drain(at, _names(logins)), *files, *_upgrade(at, _names(files)), *_plugin_restart(at)]
    changed = _names(changes)
    node = _node(at, changed, node_check)
    # Ready for the GPU checks: labelled, tainted, the turn's changes made and, in a repair, the node checked.
    ready = (StepName.NODE_LABELS, StepName.NODE_TAINT, *changed, *_names(node, only=StepName.NODE_CHECK))
    kernel = _kernel(at, ready)
    smoke = _smoke_test(at, _last(kernel, ready))
    end = _end(at, _last(smoke, _last(kernel, ready)), changed)
    return DomainPlan(domain.name, turn, (*identity, *logins, *changes, *node, *kernel, *smoke, *end))


def _names(steps: Iterable[Step], only: str | None = None) -> tuple[str, ...]:
    return tuple(step.name for step in steps if only is None or step.name == only)


def _last(steps: Sequence[Step], otherwise: tuple[str, ...]) -> tuple[str, ...]:
    """What the next phase waits for: this phase's last step, or what this phase waited for when it has none."""
    return (steps[-1].name,) if steps else otherwise


def _script_step(
    at: _Scope,
    name: str,
    does: str,
    environment: Mapping[str, str],
    *,
    waits_for: tuple[str, ...],
    platform: tuple[PlatformWait, ...] = (),
    update: str | None = None,
    triggers: tuple[str, ...] = (),
    id_triggers: tuple[str, ...] = (),
    proxmox_credentials: bool = False,
    turn_step: bool = False,
    after_previous_batch: bool = False,
    job: Mapping[str, Any] | None = None,
) -> LocalStep:
    """A step the node-steps script runs where `pulumi up` runs (`python3 -c`); `environment` names which of
    its steps (node_steps.py builds it). `job`: a repair's smoke Job, which the script creates and waits for."""
    command = Command(
        at.script,
        update=update,
        interpreter=tuple(INTERPRETER),
        environment=environment,
        proxmox_credentials=proxmox_credentials,
        triggers=triggers,
        id_triggers=id_triggers,
    )
    fields: dict[str, Any] = {
        "name": name,
        "does": does,
        "waits_for": waits_for,
        "platform": platform,
        "turn_step": turn_step,
        "after_previous_batch": after_previous_batch,
        "command": command,
    }
    return RepairSmokeStep(**fields, manifest=job) if job is not None else LocalStep(**fields)


def _remote_step(at: _Scope, name: str, does: str, command: Command, **fields: Any) -> RemoteStep:
    """A step run on the VM over SSH, as the domain's user."""
    return RemoteStep(
        name=name, does=does, command=command, host=ssh_host(at.domain), user=at.domain.username, **fields
    )


# ------------------------------------------------------------------------------------------------------ identity


def _identity(at: _Scope) -> list[Step]:
    """What the domain is: its cards' mappings, the first-boot snippet and the VM, with the two steps whose deletes
    run around the VM's when the domain is removed."""
    mappings = [
        PciMappingStep(
            name=StepName.PCI_MAPPING if index == 0 else f"{StepName.PCI_MAPPING}-{index}",
            does="the Proxmox PCI resource mapping of a card",
            card=index,
            args=pci_mapping_args(at.domain, index),
        )
        for index in mapped_indexes(at.domain)
    ]
    return [*mappings, _cloud_init(at), _node_cleanup(at), _vm(at, _names(mappings)), _retire(at)]


def _cloud_init(at: _Scope) -> CloudInitStep:
    domain, stack, marking = at.domain, at.stack, at.marking
    return CloudInitStep(
        name=StepName.CLOUD_INIT,
        does="the VM's first-boot user data (a snippet)",
        args={
            "content_type": "snippets",
            "datastore_id": stack.proxmox.snippets_datastore,
            "node_name": domain.proxmox_node,
        },
        file_name=snippet_file_name(domain),
        user_data=lambda token, registry_auth, proxy_auth: build_user_data(
            domain,
            stack.rke2,
            token,
            marking,
            stack.proxy,
            stack.mirrors,
            registry_auth,
            stack.apt_mirror,
            stack.trusted_ca,
            proxy_auth,
        ),
        # cloud-init runs once, at first boot. Rewriting the snippet later would change nothing now, but Proxmox
        # derives cloud-init's instance-id from it, so the VM's next cold start would re-run first boot (new SSH
        # host keys, RKE2 reinstalled). Its inputs are first-boot only. A replacement (another node or datastore)
        # keeps the file name, hence the resource id: created first, the new file would be deleted by the old
        # one's delete.
        options=Options(ignore_changes=("sourceRaw",), delete_before_replace=True),
    )


def _node_cleanup(at: _Scope) -> LocalStep:
    # Deletes run dependents first: the VM depends on this step, so a removed domain's VM goes first and then
    # this step's delete removes the Node object the VM left behind (nothing else would).
    return LocalStep(
        name=StepName.NODE_CLEANUP,
        does="on removal, after the VM: delete the Node object",
        command=Command(
            f"echo {shlex.quote(f'node {at.host} is removed with its VM')}",
            delete=node_cleanup_command(at.host, at.kubectl),
        ),
    )


def _vm(at: _Scope, mappings: tuple[str, ...]) -> VmStep:
    # A renamed or removed domain must never silently destroy a GPU node (`protect`). The snippet is a plain
    # dependency: the VM names it by its (fixed) volume id, see proxmox_vm.snippet_file_id.
    return VmStep(
        name=StepName.VM,
        does="the GPU worker VM",
        waits_for=(*mappings, StepName.CLOUD_INIT, StepName.NODE_CLEANUP),
        args=vm_args(at.domain, at.stack.proxmox),
        options=Options(protect=at.domain.protect, ignore_changes=VM_IGNORED),
    )


def _retire(at: _Scope) -> LocalStep:
    # This one depends on the VM, so its delete runs before the VM's (which stops it): a removed domain, protected
    # or not, is drained first. No trigger on the VM's id: a replaced VM must not drain the new node by name.
    return LocalStep(
        name=StepName.RETIRE,
        does="on removal, before the VM stops: drain the node",
        waits_for=(StepName.VM,),
        command=Command(
            f"echo {shlex.quote(f'{at.host} is drained before its VM stops when it is removed')}",
            delete=retire_drain_command(at.host, at.kubectl),
        ),
    )


# --------------------------------------------------------------------------- the turn's entry: what drains and changes


def _logins(at: _Scope) -> list[Step]:
    """The SSH logins the turn's remote steps need, proven before the drain (a failed login drains nothing)."""
    needed = [
        (
            at.turn.install_rke2 or at.turn.write_files,
            StepName.RKE2_LOGIN,
            "prove the SSH login the RKE2 upgrade needs, before the drain"
            if not at.turn.write_files
            else "prove the SSH login that writing RKE2's egress files needs (and apt's mirror), before the drain",
        ),
        (
            at.turn.drains and at.turn.install_kernel,
            StepName.KERNEL_LOGIN,
            "prove the SSH login and passwordless sudo the kernel install needs, before the drain",
        ),
    ]
    return [
        _remote_step(
            at,
            name,
            does,
            Command(
                _login_check(at, name),
                interpreter=None,
                triggers=at.key,
            ),
            waits_for=(StepName.VM,),
            after_previous_batch=True,
            turn_step=True,
        )
        for wanted, name, does in needed
        if wanted
    ]


def _login_check(at: _Scope, name: str) -> str:
    if name == StepName.KERNEL_LOGIN:
        return login_check_command(at.domain.kernel)
    login = login_check_command(None)
    sources = [f for f in domain_egress_files(at.domain, at.stack) if f["path"] == archive_sources(at.stack)["path"]]
    if not (at.turn.write_files and sources):
        return login
    # A files turn with an apt mirror proves apt can read the release from it before the drain.
    return f"{login} && {{ {apt_mirror_check_command(sources[0], at.stack.proxy)}; }}"


def _drain(at: _Scope, logins: tuple[str, ...]) -> list[Step]:
    if not at.turn.drains:
        return []
    return [
        _script_step(
            at,
            StepName.WAVE_DRAIN,
            "cordon (marked as the wave's) and drain",
            drain_environment(at.domain, at.kubectl_args, at.holder, at.stack.gpu_operator.namespace),
            waits_for=(StepName.VM, *logins),
            # The operator's new release first: with no upgrade slots of its own (driver.upgradePolicy), it
            # upgrades the driver of every cordoned node; the drain holds it off this one until it is done.
            platform=("operator",),
            after_previous_batch=True,
            triggers=at.key,
            turn_step=True,
        )
    ]


def _login(at: _Scope) -> bool:
    """Whether the proxy asks for a login: its variables are then read on the VM from the root-only file that carries
    it, never written into a step's command."""
    return at.stack.proxy.enabled and at.stack.proxy.login


def _proxy_env(at: _Scope) -> dict[str, str]:
    return proxy_environment(at.stack.proxy, at.stack.rke2, subnet_of(at.domain.network.ipv4))


def _files(at: _Scope) -> list[Step]:
    """A changed proxy or registry mirrors on a VM that exists: cloud-init ran once, so the drained node gets the
    files over SSH and its agent restarted (docs/air-gap.md)."""
    if not at.turn.write_files:
        return []
    return [
        _remote_step(
            at,
            StepName.RKE2_FILES,
            "write the proxy, registry and apt mirror files and restart rke2-agent",
            Command(
                node_files_command(
                    domain_egress_files(at.domain, at.stack), archive_sources(at.stack), proxy_login=_login(at)
                ),
                interpreter=None,
                triggers=at.key,
                stdin_from_registry_auth=lambda auth, proxy_auth=None: secret_files_payload(
                    registry_files(at.stack.mirrors, bool(at.stack.trusted_ca), auth)
                    + proxy_secret_files(at.domain, at.stack.rke2, at.stack.proxy, at.stack.apt_mirror, proxy_auth)
                ),
            ),
            waits_for=(StepName.WAVE_DRAIN,),
            turn_step=True,
        )
    ]


def _upgrade(at: _Scope, files: tuple[str, ...] = ()) -> list[Step]:
    if not at.turn.install_rke2:
        return []
    version = at.stack.rke2.version
    return [
        _remote_step(
            at,
            StepName.RKE2_UPGRADE,
            f"install RKE2 {version} and restart rke2-agent",
            Command(
                rke2_upgrade_command(version, _proxy_env(at), at.stack.rke2.installer, from_agent_env=_login(at)),
                interpreter=None,
                triggers=at.key,
            ),
            # After the files: the installer's restart then reads them too.
            waits_for=(StepName.WAVE_DRAIN, *files),
            turn_step=True,
        )
    ]


def _plugin_restart(at: _Scope) -> list[Step]:
    if not at.turn.restart_plugins:
        return []
    namespace = at.stack.gpu_operator.namespace
    return [
        LocalStep(
            name=StepName.PLUGIN_RESTART,
            does="restart the device plugin and GPU Feature Discovery on the new profile",
            waits_for=(StepName.WAVE_DRAIN,),
            platform=("time-slicing-config",),
            command=Command(device_plugin_restart_command(at.host, at.kubectl, namespace), triggers=at.key),
            turn_step=True,
        )
    ]


# -------------------------------------------------------------------------------------------------------- the node


def _node(at: _Scope, changed: tuple[str, ...], node_check: Command | None) -> list[Step]:
    """The node itself: power-cycled where Proxmox has a change pending, Ready, checked again in a repair,
    labelled and tainted."""
    domain, repair = at.domain, at.repair
    steps: list[Step] = [
        _script_step(
            at,
            StepName.POWER_CYCLE,
            f"stop and start VM {domain.vm_id} on {domain.proxmox_node} through the Proxmox API (recorded on the Node)"
            if repair
            else "power-cycle the VM if Proxmox has a change pending or the card moved (drained first)",
            power_cycle_environment(
                domain,
                at.stack.proxmox,
                at.kubectl_args,
                NODE_READY_MINUTES,
                forced=at.turn.reason if repair else None,
            ),
            waits_for=(StepName.VM, *changed),
            proxmox_credentials=True,
        ),
        _script_step(
            at,
            StepName.NODE_READY,
            "wait for the node to register and be Ready",
            step_environment(ScriptStep.NODE_READY, at.host, at.kubectl_args, NODE_READY_MINUTES),
            waits_for=(StepName.POWER_CYCLE,),
            triggers=(at.host,),
            id_triggers=(StepName.VM,),
        ),
    ]
    if repair and node_check is not None:
        steps.append(
            _remote_step(
                at,
                StepName.NODE_CHECK,
                "node-check on the node again: the card on the bus, the driver, NVML, no new Xid",
                node_check,
                waits_for=(StepName.NODE_READY,),
                turn_step=True,
            )
        )
    return [*steps, _labels(at, changed), _taint(at)]


def _labels(at: _Scope, changed: tuple[str, ...]) -> NodeLabelsStep:
    return NodeLabelsStep(
        name=StepName.NODE_LABELS,
        does="label the node (GPU pool, zone, sharing profile)",
        # The profile the label names must exist first, or that node's device plugin loses its card.
        waits_for=(StepName.NODE_READY, *changed),
        platform=("time-slicing-config",),
        manifest={
            "name": at.host,
            "labels": node_labels(at.domain, at.marking),
            # RKE2 registered these labels under its own field manager; take them over so a changed sharing
            # profile converges instead of failing on an apply conflict.
            "annotations": {"pulumi.com/patchForce": "true"},
        },
    )


def _taint(at: _Scope) -> LocalStep:
    return LocalStep(
        name=StepName.NODE_TAINT,
        does="taint the node so only GPU pods land on it",
        waits_for=(StepName.NODE_READY,),
        command=Command(
            taint_command(at.host, at.kubectl, at.marking),
            delete=untaint_command(at.host, at.kubectl, at.marking),
            triggers=(at.host, at.marking.taint),
        ),
        # Delete first: the old step's delete removes the taint by key, which would undo the new one.
        options=Options(delete_before_replace=True),
    )


# ------------------------------------------------------------------------------------------------------ the kernel


def _kernel(at: _Scope, ready: tuple[str, ...]) -> list[Step]:
    """A pinned kernel: installed and the driver rebuilt, on a first install with a drain of its own (no wave:
    every step triggered by the pin alone), in a turn after the wave's drain (keyed on the turn)."""
    kernel, turn = at.domain.kernel, at.turn
    if kernel is None:
        return []
    if turn.kind == "first-install":
        pin = (kernel,)
        return [
            *_first_install_drain(at, kernel, ready),
            _kernel_install(at, kernel, (StepName.KERNEL_DRAIN,), pin, turn=False),
            _kernel_rebuild(at, kernel, (StepName.KERNEL_INSTALL,), pin, turn=False),
        ]
    if not (turn.drains and turn.rebuild_driver):
        return []
    install = [_kernel_install(at, kernel, ready, at.key, turn=True)] if turn.install_kernel else []
    return [*install, _kernel_rebuild(at, kernel, _last(install, ready), at.key, turn=True)]


def _first_install_drain(at: _Scope, kernel: str, after: tuple[str, ...]) -> list[Step]:
    """A kernel pin on a node with no Node yet (or with the cluster not read): its own drain, no wave. Every
    step is triggered by the pin alone; any other change to one runs its `update`, which does nothing."""
    unchanged = unchanged_kernel_command(kernel)
    triggers = (kernel,)
    return [
        _remote_step(
            at,
            StepName.KERNEL_LOGIN,
            "prove the SSH login and passwordless sudo the kernel install needs",
            Command(login_check_command(kernel), update=unchanged, interpreter=None, triggers=triggers),
            waits_for=after,
        ),
        _script_step(
            at,
            StepName.KERNEL_DRAIN,
            "cordon (marked as the wave's) and drain",
            drain_environment(at.domain, at.kubectl_args, at.holder, at.stack.gpu_operator.namespace),
            waits_for=(*after, StepName.KERNEL_LOGIN),
            update=unchanged_kernel_script(kernel),
            triggers=triggers,
        ),
    ]


def _kernel_install(
    at: _Scope, kernel: str, after: tuple[str, ...], triggers: tuple[str, ...], *, turn: bool
) -> RemoteStep:
    return _remote_step(
        at,
        StepName.KERNEL_INSTALL,
        f"install and hold kernel {kernel}, reboot into it",
        Command(
            install_kernel_command(kernel),
            update=unchanged_kernel_command(kernel),
            interpreter=None,
            triggers=triggers,
        ),
        waits_for=after,
        turn_step=turn,
    )


def _kernel_rebuild(
    at: _Scope, kernel: str, after: tuple[str, ...], triggers: tuple[str, ...], *, turn: bool
) -> LocalStep:
    return _script_step(
        at,
        StepName.KERNEL_REBUILD,
        f"wait for the node on kernel {kernel}, then rebuild its driver",
        step_environment(
            ScriptStep.KERNEL_REBUILD,
            at.host,
            at.kubectl_args,
            NODE_READY_MINUTES,
            KERNEL=kernel,
            OPERATOR_NAMESPACE=at.stack.gpu_operator.namespace,
        ),
        waits_for=after,
        # `python3 -c` runs the update too: the unchanged kernel said in Python, not in shell.
        update=unchanged_kernel_script(kernel),
        triggers=triggers,
        turn_step=turn,
    )


# -------------------------------------------------------------------------------------------------- the smoke test


def _smoke_test(at: _Scope, ready: tuple[str, ...]) -> list[Step]:
    """The gate on the node's slots, then one card's smoke Job at a time (each holds every slot of the node so
    that it can pick its card); a repair runs the stack's Jobs again under names of its own."""
    if not at.stack.smoke_test.enabled:
        return []
    jobs = _smoke_jobs(at)
    steps: list[Step] = [_gpu_ready(at, ready, jobs)]
    for card, job in enumerate(jobs):
        name = StepName.SMOKE_TEST if card == 0 else f"{StepName.SMOKE_TEST}-{card}"
        on_card = f" on card {card}" if len(jobs) > 1 else ""
        after = (steps[-1].name,)
        if at.repair:
            steps.append(_repair_smoke(at, name, on_card, after, _repair_job(job, at.turn)))
            continue
        steps.append(
            SmokeJobStep(
                name=name,
                does="CUDA smoke test" + on_card,
                waits_for=after,
                platform=("smoke-namespace", "steering-policy"),
                manifest=job,
                # pulumi-kubernetes awaits a Job until it completes: `pulumi up` fails here, named after this
                # domain, if the CUDA sample fails on its card. The provider's Job await defaults to 10 minutes.
                options=Options(
                    delete_before_replace=True, create_timeout_seconds=smoke_budget_seconds(at.stack.smoke_test)
                ),
            )
        )
    return steps


def _smoke_jobs(at: _Scope) -> list[dict[str, Any]]:
    domain, stack = at.domain, at.stack
    several = len(domain.cards) > 1
    return [
        build_smoke_job(
            domain.name,
            stack.smoke_test,
            validated_stack(
                chart_version=stack.gpu_operator.chart_version,
                driver_version=stack.gpu_operator.driver_version,
                node=at.host,
                device=smoke_device(domain, card),
                image=stack.smoke_test.image,
                kernel=domain.kernel,
            ),
            toleration=None if stack.kyverno.enabled else at.marking.toleration,
            card=card if several else None,
            gpus=stack.slots(domain) if several else 1,
        )
        for card in _smoke_cards(domain)
    ]


def _gpu_ready(at: _Scope, ready: tuple[str, ...], jobs: list[dict[str, Any]]) -> LocalStep:
    # The Jobs start only once the node advertises every card's slots on the pinned driver: the first driver
    # build and the driver upgrade happen here, not inside a Job's deadline. SMOKE_JOB makes the gate run again
    # whenever a Job does (a new name: what it validates changed).
    names = [job["metadata"]["name"] for job in jobs]
    return _script_step(
        at,
        StepName.GPU_READY,
        "wait for its GPU slots on the pinned driver",
        gpu_ready_environment(
            at.domain, at.stack, at.kubectl_args, SMOKE_JOB=",".join(names) if len(names) > 1 else names[0]
        ),
        waits_for=ready,
        platform=("operator",),
    )


def _repair_smoke(at: _Scope, name: str, on_card: str, after: tuple[str, ...], job: Mapping[str, Any]) -> LocalStep:
    minutes = max(1, -(-smoke_budget_seconds(at.stack.smoke_test) // 60))
    return _script_step(
        at,
        name,
        f"CUDA smoke test{on_card} again, as Job {job['metadata']['name']}",
        step_environment(
            ScriptStep.SMOKE_TEST, at.host, at.kubectl_args, minutes, SMOKE_JOB=json.dumps(job, sort_keys=True)
        ),
        waits_for=after,
        job=job,
    )


# ---------------------------------------------------------------------------------------------------------- the end


def _end(at: _Scope, last: tuple[str, ...], changed: tuple[str, ...]) -> list[Step]:
    """The turn's gate, then its last step: the rollout record (or, in a repair, the repair's), which ends the
    turn and uncordons the node where the turn cordoned it."""
    steps: list[Step] = []
    if at.turn.gated:
        steps.append(_wave_gate(at, (*last, *(name for name in changed if name not in last))))
    done = _repair_done if at.repair else _rollout
    return [*steps, done(at, _last(steps, last))]


def _wave_gate(at: _Scope, after: tuple[str, ...]) -> LocalStep:
    return _script_step(
        at,
        StepName.WAVE_GATE,
        "gate: Ready at the pinned kubelet, slots on the pinned driver",
        gpu_ready_environment(
            at.domain,
            at.stack,
            at.kubectl_args,
            KUBELET_VERSION=at.stack.rke2.version,
            WAVE_DOMAIN=at.domain.name,
            TURN_HOLDER=at.holder,
            # A driver change passes only on a driver pod the operator replaced in this turn (node/gate.py).
            **({"FRESH_DRIVER": "1"} if {"driver", "driver-template"} & set(at.turn.changes) else {}),
        ),
        waits_for=after,
        platform=("operator",),
        triggers=at.key,
        turn_step=True,
    )


def _repair_done(at: _Scope, after: tuple[str, ...]) -> LocalStep:
    turn = at.turn
    return _script_step(
        at,
        StepName.ROLLOUT,
        "record the repair on the Node and as an Event, end the turn"
        + (", uncordon" if turn.uncordons else "; the node stays cordoned (cordoned by someone else)"),
        step_environment(
            ScriptStep.REPAIR_DONE, at.host, at.kubectl_args, REPAIR_DONE_MINUTES, REPAIR_REASON=turn.reason
        ),
        waits_for=after,
    )


def _rollout(at: _Scope, after: tuple[str, ...]) -> LocalStep:
    turn = at.turn
    ends = ", uncordon" if turn.uncordons else "; the node stays cordoned (cordoned by someone else before the wave)"
    # A resumed turn may end in a state equal to the last one recorded (a change reverted): the attempt's token makes
    # the step run anyway, so the node it cordoned is uncordoned after its gate. Only then: a resumed turn that rolls
    # a change runs the step for its new record, and a token there stayed behind in the state, so the next `up`
    # showed `~ dcN-rollout` and ran it again, outside any turn (issue 36 item 7's e2e).
    resumed = {"GPU_POOL_RESUMED_TURN": turn.resume_token} if turn.resume_token and not turn.changes else {}
    return _script_step(
        at,
        StepName.ROLLOUT,
        "record the rollout" + ends if turn.gated else "record what the node runs",
        rollout_environment(at.domain, at.kubectl_args, rollout_state(at.domain, at.stack), **resumed),
        waits_for=after,
    )


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


def version_only_note(stack: StackConfig, nodes: Mapping[str, Any]) -> str | None:
    """What `make diff` says of Nodes a gpu-pool from before the driver template's digest recorded (issue 47 item
    4): their record has the driver version only, and is taken as rolled to this stack's template."""
    old = [
        name for name, node in nodes_by_domain(stack, nodes).items() if node is not None and records_version_only(node)
    ]
    if not old:
        return None
    many = len(old) > 1
    upgrade = (
        "this gpu-pool rewrites the driver DaemonSet of this stack once (the digest of the ConfigMaps the driver "
        "mounts, in its env), so one wave runs for the upgrade itself"
        if legacy_template_changes(stack)
        else "this gpu-pool changes nothing in the driver DaemonSet of this stack, so the upgrade alone turns no domain"
    )
    return (
        f"{', '.join(old)} record{'' if many else 's'} the driver version only (written by a gpu-pool from before "
        f"the driver template's digest): {'they are' if many else 'it is'} taken as rolled to this stack's driver "
        f"template; {upgrade}, and each domain's rollout step records the digest in this `up`. A chart or "
        "driver-values change made in this same `up` would not be planned as a wave: make it in the next one"
    )


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
