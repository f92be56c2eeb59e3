"""Day 2 as a state machine: each domain's *turn*, decided by what its Node says and what the stack file asks,
and the wave that orders the turns, one batch of `rollout.maxUnavailable` domains at a time.

`TURN_TABLE` below is the table: for each state the Node is observed in and each way the stack compares with
the Node's record, the turn (`turn_for` looks its turn up there, and tests/gpu_failure_domain/test_plan.py checks
every row). A kubelet or a record newer than the pin is refused before any turn (`rke2_problems`): RKE2 does not
downgrade in place.

A `repair` turn is not planned by a wave: `gpu-pool repair` asks for it when doctor and node-check find a floor a
power cycle of the VM fixes (day2/repair/decide.py). It drains like a roll, power-cycles the VM from Proxmox whatever is
pending, checks the node again (node-check, the gate, the smoke test under a new Job name), then ends the turn:
uncordoned where the wave's (or the repair's) drain cordoned it, its rollout record left as it was, since a
repair changes nothing the stack asks for.

What runs is decided by what the Node shows, not only by its record: the RKE2 installer only where the kubelet
is not on the pin, the kernel install only where the node does not run the pinned kernel. The gate and the
record run in every turn, so a node is never uncordoned ungated.

Domains already out (a turn in progress, cordoned by someone else with a change, or not Ready) go first: they
cost no more capacity, and the serving ones follow `rollout.order`. Each batch waits for the previous batch's last
steps.

A Node whose Ready condition is `False` or `Unknown` (the kubelet stopped reporting: the node lifecycle controller
taints it unreachable, it is never cordoned) is out, as the GPU Operator's own upgrade controller counts it
(k8s-operator-libs common_manager.go, unavailable nodes) and as `gpu-pool repair`'s guard rail does: the capacity
timeline counts it out from the start, draining another domain while it is out is a danger when that exceeds
`rollout.maxUnavailable`, and its own turn stops before the drain (rollout.wave_drain_command: no `kubectl drain`
waits 15 minutes on an unreachable kubelet), which stops the wave there with `gpu-pool repair <node>` or waiting
for Ready as the way on (FIELD-REVIEW-5 WRONG-3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from components.gpu_failure_domain.observed import ObservedNode
from components.gpu_failure_domain.rollout import CHANGE_KEYS, DRIVER_TEMPLATE_KEY, rollout_state
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig
from knowledge.kubernetes import KUBELET_MAX_MINORS_PER_UPGRADE

Kind = Literal["first-install", "none", "roll", "verify", "resume", "repair"]
Situation = Literal["no Node", "serving", "cordoned by someone else", "a turn in progress", "not Ready"]
# The stack against what the Node records: the same, or different with something to change on the node (to
# disrupt: drained first), or different while the node already runs what the stack asks (upgraded by hand).
Record = Literal["-", "equal", "differs, to disrupt", "differs, already running"]
# What a turn changes on a node that needs it drained first (the plugin restart: pods lose their slots).
DISRUPTIVE = ("vm", "driver", "driver-template", "sharing", "files")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][^+]*?rke2r(\d+))?")


@dataclass(frozen=True)
class TurnRule:
    """One row of the turn table: the Node observed so, the stack against its record so, gives this turn."""

    situation: Situation
    record: Record
    kind: Kind
    does: str


_RESUME = "what is still needed, the plugin restart, gate, uncordon if the wave cordoned it, record"
TURN_TABLE: tuple[TurnRule, ...] = (
    TurnRule("no Node", "-", "first-install", "built in parallel, no wave (a first install, or the cluster not read)"),
    TurnRule("serving", "equal", "none", "nothing"),
    TurnRule("serving", "differs, to disrupt", "roll", "drain, change, gate, uncordon, record"),
    TurnRule("serving", "differs, already running", "verify", "gate and record, no drain"),
    TurnRule("cordoned by someone else", "equal", "none", "nothing; it stays cordoned"),
    TurnRule(
        "cordoned by someone else", "differs, to disrupt", "roll", "drain, change, gate, record: it stays cordoned"
    ),
    TurnRule("cordoned by someone else", "differs, already running", "verify", "gate and record: it stays cordoned"),
    # A turn in progress: its drain ran, its last step did not (a change may have been reverted since).
    TurnRule("a turn in progress", "equal", "resume", _RESUME),
    TurnRule("a turn in progress", "differs, to disrupt", "resume", _RESUME),
    TurnRule("a turn in progress", "differs, already running", "resume", _RESUME),
    # Not Ready (Ready False or Unknown, no turn in progress): out, as cordoned is. A turn it needs is a drain, which
    # stops before it runs while the node is not Ready (rollout.wave_drain_command): its gate cannot pass anyway.
    TurnRule("not Ready", "equal", "none", "nothing; it counts as out"),
    TurnRule("not Ready", "differs, to disrupt", "roll", "its turn stops before the drain unless it is Ready by then"),
    TurnRule(
        "not Ready", "differs, already running", "roll", "its turn stops before the drain unless it is Ready by then"
    ),
)
_TURN_KIND: dict[tuple[Situation, Record], Kind] = {(rule.situation, rule.record): rule.kind for rule in TURN_TABLE}


def version_key(version: str) -> tuple[int, int, int, int] | None:
    """`v1.33.6+rke2r2` -> (1, 33, 6, 2): the release and its RKE2 revision, compared in full (a patch or
    revision downgrade is a downgrade)."""
    match = _VERSION.match(version)
    if not match:
        return None
    major, minor, patch, revision = match.groups()
    return int(major), int(minor), int(patch or 0), int(revision or 0)


@dataclass(frozen=True)
class Turn:
    """One domain's part of this `up`: what it is observed in, what differs, and what must run."""

    domain: str
    kind: Kind
    situation: Situation
    changes: tuple[str, ...] = ()
    install_rke2: bool = False
    install_kernel: bool = False
    # The egress files (proxy, registry and apt mirrors) written over SSH and rke2-agent restarted: cloud-init ran once.
    write_files: bool = False
    rebuild_driver: bool = False
    restart_plugins: bool = False
    # The turn ends with the node serving (the wave cordoned it) or, cordoned by someone else, still cordoned.
    uncordons: bool = True
    # Unique to the drain a resumed turn found (observed.py), '' for a fresh turn.
    resume_token: str = ""
    # Every step of the turn is keyed on it: where the node comes from, what it goes to, which attempt.
    key: str = ""
    # Why an earlier attempt stopped, as the node says (observed.WAVE_STOPPED_ANNOTATION).
    stopped: str = ""
    # A repair's reason: the broken floor a power cycle fixes (what the power cycle and its record say).
    reason: str = ""
    # Why a change is planned that the stack file did not make (a Node recorded by an older gpu-pool).
    note: str = ""

    @property
    def drains(self) -> bool:
        return self.kind in ("roll", "resume", "repair")

    @property
    def gated(self) -> bool:
        return self.kind in ("roll", "verify", "resume", "repair")

    @property
    def needs_ssh(self) -> bool:
        return self.install_rke2 or self.install_kernel or self.write_files

    def why(self) -> str:
        """One line: why this domain has this turn, and how it ends."""
        what = ", ".join(self.changes) or "nothing"
        end = "" if self.uncordons else "; it stays cordoned: someone else cordoned it before the wave"
        if self.situation == "not Ready":
            end += (
                "; it is not Ready: its turn stops before the drain unless it is Ready by then "
                "(`gpu-pool repair`, or wait for Ready)"
            )
        then = "uncordon and record" if self.uncordons else "record"
        end += f"; {self.note}" if self.note else ""
        return {
            "first-install": "no Node yet: created with the others, no wave",
            "none": "the Node records what the stack asks",
            "roll": f"{self.situation}; the Node records another {what}: drain, change, gate, {then}{end}",
            "verify": f"{self.situation}; the Node records another {what}, but it already runs what the stack asks: "
            "gate and record, no drain",
            "resume": f"a turn in progress since {self.resume_token}"
            + (f" ({self.stopped})" if self.stopped else "")
            + f": finish what it still needs, gate, {then}{end}",
            "repair": f"{self.situation}"
            + (f" ({self.stopped})" if self.stopped else "")
            + f"; {self.reason}: drain, power-cycle the VM, check the card again, gate, "
            f"smoke test, {'uncordon' if self.uncordons else 'end the turn'}{end}",
        }[self.kind]


def _changes(
    desired: Mapping[str, str], observed: ObservedNode, domain: FailureDomainConfig, stack: StackConfig
) -> list[str]:
    recorded = observed.rollout
    kubelet_off = bool(observed.kubelet_version) and observed.kubelet_version != desired["rke2"]
    kernel_off = bool(domain.kernel) and observed.kernel_version != domain.kernel
    if recorded is None:
        # A Node from before waves records nothing: it rolls only what it shows, and the egress files the stack
        # asks for (they cannot be seen from the cluster; writing them again changes nothing).
        found = {"rke2": kubelet_off, "kernel": kernel_off, "files": "files" in desired}
    else:
        # A key missing on either side is '' (a Node recorded before `files` existed, a stack without egress files).
        found = {key: recorded.get(key, "") != desired.get(key, "") for key in CHANGE_KEYS}
        found["rke2"] = found["rke2"] or kubelet_off
        found["kernel"] = found["kernel"] or kernel_off
        if records_version_only(observed):
            found[DRIVER_TEMPLATE_KEY] = legacy_template_changes(stack)
    # A driver version change is a template change too: one turn, named after the version.
    if found.get("driver"):
        found[DRIVER_TEMPLATE_KEY] = False
    return [key for key in CHANGE_KEYS if found.get(key)]


LEGACY_TEMPLATE_NOTE = (
    "its Node records the driver version only (a gpu-pool from before the driver template's digest) and this "
    "gpu-pool adds the content digest of the ConfigMaps the driver mounts (apt mirror, lab CA) to the driver's env, "
    "which rewrites the driver DaemonSet once: this wave runs once, for the upgrade of gpu-pool itself"
)


def records_version_only(observed: ObservedNode) -> bool:
    """The Node's rollout record is a gpu-pool's from before the driver template's digest."""
    return observed.rollout is not None and DRIVER_TEMPLATE_KEY not in observed.rollout


def legacy_template_changes(stack: StackConfig) -> bool:
    """Whether a Node that records the driver version only (a gpu-pool from before the driver template's digest)
    needs a turn for the template: only where this gpu-pool itself changes the driver DaemonSet of that stack, which
    is the content digest of the ConfigMaps the driver mounts (an apt mirror or a lab CA, DRIVER_MOUNTS_ENV), once.
    Otherwise the template is taken as the one the Node was rolled to: the upgrade alone rolls no domain, and a
    chart or driver-values change must come in a later `up` (make diff says so, docs/day2.md)."""
    return stack.apt_mirror is not None or stack.trusted_ca is not None


def turn_for(domain: FailureDomainConfig, stack: StackConfig, observed: ObservedNode | None) -> Turn:
    """The domain's turn from its Node (None: not registered, or the cluster was not read), as TURN_TABLE says."""
    if observed is None:
        return Turn(domain.name, _TURN_KIND[("no Node", "-")], "no Node")
    desired = rollout_state(domain, stack)
    changes = _changes(desired, observed, domain, stack)
    in_turn = observed.turn_in_progress
    install_rke2 = "rke2" in changes and observed.kubelet_version != desired["rke2"]
    install_kernel = bool(domain.kernel) and observed.kernel_version != domain.kernel
    rebuild_driver = bool(domain.kernel) and (install_kernel or "kernel" in changes)
    disrupts = install_rke2 or rebuild_driver or any(key in changes for key in DISRUPTIVE)
    situation = _situation(observed)
    record: Record = "equal" if not changes else "differs, to disrupt" if disrupts else "differs, already running"
    kind = _TURN_KIND[(situation, record)]
    if kind == "none":
        return Turn(domain.name, kind, situation)
    resume = observed.resume_token if in_turn else ""
    key = json.dumps({"from": dict(observed.rollout or {}), "resume": resume, "to": desired}, sort_keys=True)
    return Turn(
        domain.name,
        kind,
        situation,
        tuple(changes),
        install_rke2=install_rke2,
        install_kernel=install_kernel,
        write_files="files" in changes,
        rebuild_driver=rebuild_driver,
        # A resumed turn cannot know which profile the plugin read last (a change may have been reverted since):
        # it restarts the plugin and GFD on the drained node, which costs nothing there.
        restart_plugins="sharing" in changes or in_turn,
        uncordons=bool(observed.wave_cordoned) if in_turn else not observed.unschedulable,
        resume_token=resume,
        key=key,
        stopped=(observed.wave_stopped or "") if in_turn else "",
        note=LEGACY_TEMPLATE_NOTE if DRIVER_TEMPLATE_KEY in changes and records_version_only(observed) else "",
    )


def _situation(observed: ObservedNode) -> Situation:
    if observed.turn_in_progress:
        return "a turn in progress"
    if not observed.ready:
        return "not Ready"
    return "cordoned by someone else" if observed.cordoned_by_someone_else else "serving"


def repair_turn(domain: FailureDomainConfig, observed: ObservedNode, reason: str, at: str) -> Turn:
    """The turn `gpu-pool repair` runs at time `at` on a domain whose Node is registered: what the Node shows
    decides how it ends, as for every turn (a node someone else cordoned stays cordoned). Its rollout record is
    left alone: a change the stack still asks for is rolled by the next `pulumi up`, gated again."""
    in_turn = observed.turn_in_progress
    situation = _situation(observed)
    resume = observed.resume_token if in_turn else ""
    return Turn(
        domain.name,
        "repair",
        situation,
        uncordons=bool(observed.wave_cordoned) if in_turn else not observed.unschedulable,
        resume_token=resume,
        key=json.dumps({"at": at, "repair": reason, "resume": resume}, sort_keys=True),
        # A repair that stopped (day2/repair/run.py writes the note) says so when it is run again.
        stopped=(observed.wave_stopped or "") if in_turn else "",
        reason=reason,
    )


# ---------------------------------------------------------------------------------------------------- the wave


def wave_order(stack: StackConfig) -> list[str]:
    """rollout.order first, then the remaining domains in failureDomains order."""
    listed = list(stack.rollout.order or [])
    return listed + [d.name for d in stack.failure_domains if d.name not in listed]


@dataclass(frozen=True)
class CapacityPoint:
    """A moment of the wave: the domains out (drained or cordoned) and the GPU slots still schedulable."""

    out: tuple[str, ...]
    slots: int

    def as_json(self) -> dict[str, object]:
        return {"out": list(self.out), "slots": self.slots}


@dataclass
class Wave:
    """Every domain's turn, the disruptive ones in batches (batch i starts once batch i-1 has ended), the GPU
    capacity at each point, the dangers a user must see before `up`, and the refusals."""

    turns: dict[str, Turn]
    batches: list[list[str]] = field(default_factory=list)
    capacity: list[CapacityPoint] = field(default_factory=list)
    dangers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Domains this up must turn that a repair holds (observed.TURN_HOLDER_ANNOTATION): `pulumi preview`/`up`
    # refuse them, `make diff` shows them as dangers (they are in `dangers` too).
    holds: list[str] = field(default_factory=list)

    def previous(self, domain: str) -> list[str]:
        for index, batch in enumerate(self.batches):
            if domain in batch:
                return self.batches[index - 1] if index else []
        return []

    @property
    def changes(self) -> dict[str, list[str]]:
        return {name: list(turn.changes) for name, turn in self.turns.items() if turn.changes or turn.kind == "resume"}

    @property
    def active(self) -> bool:
        """Anything for the wave to do or to warn about."""
        return bool(self.changes) or bool(self.dangers)


def _batches(stack: StackConfig, turns: Mapping[str, Turn], out: Sequence[str]) -> list[list[str]]:
    size = stack.rollout.max_unavailable
    draining = [name for name in wave_order(stack) if turns[name].drains]
    first = [name for name in draining if name in out]
    rest = [name for name in draining if name not in out]
    if len(first) >= size:
        # Already out: finishing them together costs no capacity and brings them back soonest.
        return [first] + [rest[i : i + size] for i in range(0, len(rest), size)]
    ordered = first + rest
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _capacity(
    stack: StackConfig, turns: Mapping[str, Turn], batches: list[list[str]], out: Sequence[str]
) -> list[CapacityPoint]:
    slots = {d.name: stack.slots(d) for d in stack.failure_domains}
    names = [d.name for d in stack.failure_domains]
    # Out for good: cordoned by someone else, and not uncordoned by their turn.
    stays = [name for name in out if not (turns[name].drains and turns[name].uncordons)]

    def point(domains: set[str]) -> CapacityPoint:
        listed = tuple(name for name in names if name in domains)
        return CapacityPoint(listed, sum(slots[name] for name in names if name not in domains))

    points = [point(set(out))]
    for index, batch in enumerate(batches):
        waiting = {name for later in batches[index + 1 :] for name in later if name in out}
        points.append(point(set(stays) | set(batch) | waiting))
    points.append(point(set(stays)))
    return points


def _dangers(
    stack: StackConfig,
    turns: Mapping[str, Turn],
    capacity: list[CapacityPoint],
    out: Sequence[str],
    not_ready: frozenset[str] = frozenset(),
) -> list[str]:
    dangers: list[str] = []
    count = len(stack.failure_domains)
    size = stack.rollout.max_unavailable
    if size >= count:
        dangers.append(
            f"gpu-pool:rollout.maxUnavailable is {size} with {count} failure domain{'s' if count > 1 else ''}: a wave "
            "drains every domain at once and the pool has no GPU until they are back; set it below "
            f"{count} (1 keeps all but one domain serving)"
        )
    seen: set[tuple[str, ...]] = set()
    for point in capacity:
        if point.slots == 0 and point.out and point.out not in seen:
            seen.add(point.out)
            dangers.append(
                f"the pool has no schedulable GPU while {', '.join(point.out)} "
                f"{'are' if len(point.out) > 1 else 'is'} out in this wave"
            )
    sick = [name for name in out if name in not_ready]
    others = [
        name
        for name in out
        if name not in not_ready and (turns[name].situation == "cordoned by someone else" or not turns[name].uncordons)
    ]
    widest = max((len(point.out) for point in capacity), default=0)
    if sick and widest > size:
        dangers.append(
            f"{', '.join(sick)} {'are' if len(sick) > 1 else 'is'} not Ready (the kubelet does not report) and "
            f"count{'' if len(sick) > 1 else 's'} as out, so this wave has {widest} domains out at once while "
            f"gpu-pool:rollout.maxUnavailable is {size}: bring {'them' if len(sick) > 1 else 'it'} back first "
            "(`gpu-pool repair <node> --stack <stack>`, or wait for Ready), or roll this change later"
        )
    for name in sick:
        if turns[name].drains:
            dangers.append(
                f"{name} is not Ready: its turn stops before the drain and the wave stops there unless it is Ready "
                "by then (`gpu-pool repair <node> --stack <stack>`, or wait for Ready; `pulumi up` again resumes)"
            )
    if others and widest > size:
        dangers.append(
            f"{', '.join(others)} {'are' if len(others) > 1 else 'is'} cordoned by someone else and "
            f"stay{'' if len(others) > 1 else 's'} out, so this wave has {widest} domains out at once while "
            f"gpu-pool:rollout.maxUnavailable is {size}: uncordon {'them' if len(others) > 1 else 'it'} first, or "
            "roll this change later"
        )
    return dangers


def rke2_problems(
    stack: StackConfig, observed: Mapping[str, ObservedNode | None], turns: Mapping[str, Turn], server: str | None
) -> list[str]:
    """The version-skew refusals (knowledge/kubernetes.py) on the full version: a worker newer than the servers, a
    jump of more than one minor, a downgrade (patch and RKE2 revision included), and an upgrade that cannot log in
    to its VM."""
    pin = stack.rke2.version
    target = version_key(pin)
    problems: list[str] = []
    server_key = version_key(server or "")
    if target and server_key and target[:2] > server_key[:2]:
        problems.append(
            f"gpu-pool:rke2.version: {pin} is newer than the cluster's servers ({server}); a kubelet "
            "must not be newer than kube-apiserver (Kubernetes version-skew policy): upgrade the servers first, "
            "then the workers"
        )
    jumps: dict[str, list[str]] = {}
    downgrades: dict[str, list[str]] = {}
    for domain in stack.failure_domains:
        node = observed.get(domain.name)
        running = (node.kubelet_version or (node.rollout or {}).get("rke2")) if node else None
        now = version_key(running or "")
        if target is None or now is None or running is None:
            continue
        if target[0] != now[0] or target[1] - now[1] > KUBELET_MAX_MINORS_PER_UPGRADE:
            jumps.setdefault(running, []).append(domain.name)
        elif target < now:
            downgrades.setdefault(running, []).append(domain.name)
    for running, names in jumps.items():
        now = version_key(running)
        assert now is not None
        problems.append(
            f"gpu-pool:rke2.version: {pin} is more than one minor from {running}, which domain"
            f"{'s' if len(names) > 1 else ''} {', '.join(names)} run{'' if len(names) > 1 else 's'}; RKE2 upgrades "
            f"one minor at a time: pin the latest v{now[0]}.{now[1] + 1} release first, `pulumi up`, then the next"
        )
    for running, names in downgrades.items():
        problems.append(
            f"gpu-pool:rke2.version: {pin} is older than {running}, which domain{'s' if len(names) > 1 else ''} "
            f"{', '.join(names)} run{'' if len(names) > 1 else 's'}; RKE2 does not downgrade a node in place (its "
            f"patch and rke2r revision count too): pin {running} or newer, or roll that node back by RKE2's own "
            "procedure first (https://docs.rke2.io/upgrades/roll-back)"
        )
    # A kernel pin without a key is refused with the config (config/cross_key.py); an RKE2 upgrade only needs one
    # where the installer must run.
    no_key = [d.name for d in stack.failure_domains if turns[d.name].install_rke2 and not d.ssh_authorized_keys]
    no_key_files = [
        d.name
        for d in stack.failure_domains
        if turns[d.name].write_files and not turns[d.name].install_rke2 and not d.ssh_authorized_keys
    ]
    if no_key_files:
        many = len(no_key_files) > 1
        problems.append(
            f"gpu-pool:failureDomains[{no_key_files[0]}].sshAuthorizedKeys: the changed gpu-pool:proxy, "
            "gpu-pool:registryMirrors or gpu-pool:aptMirror are written on the VM over SSH, but "
            f"domain{'s' if many else ''} {', '.join(no_key_files)} ha{'ve' if many else 's'} no key: a VM only "
            "trusts the keys it was created with, so recreate those workers (their first boot writes the files) or "
            "keep the proxy and mirrors they were created with"
        )
    if no_key:
        problems.append(
            f"gpu-pool:failureDomains[{no_key[0]}].sshAuthorizedKeys: the RKE2 upgrade to {pin} runs the installer "
            f"on the VM over SSH, but domain{'s' if len(no_key) > 1 else ''} {', '.join(no_key)} "
            f"ha{'ve' if len(no_key) > 1 else 's'} no key: a VM only trusts the keys it was created with, so "
            "upgrade those workers by hand (INSTALL_RKE2_VERSION, then restart rke2-agent) or recreate them"
        )
    return problems


def plan_wave(stack: StackConfig, observed: Mapping[str, ObservedNode | None], server: str | None = None) -> Wave:
    by_name = {d.name: d for d in stack.failure_domains}
    turns = {name: turn_for(by_name[name], stack, observed.get(name)) for name in wave_order(stack)}
    # Out before the wave starts: cordoned, in a turn, or not Ready (observed.ObservedNode.out, as repair counts).
    out = [
        name
        for name in wave_order(stack)
        if (node := observed.get(name)) is not None
        and (node.unschedulable or not node.ready or turns[name].kind == "resume")
    ]
    not_ready = frozenset(name for name in out if (node := observed.get(name)) is not None and not node.ready)
    batches = _batches(stack, turns, out)
    capacity = _capacity(stack, turns, batches, out) if batches else []
    holds = _held_by_a_repair(stack, observed, turns)
    return Wave(
        turns=turns,
        batches=batches,
        capacity=capacity,
        dangers=_dangers(stack, turns, capacity, out, not_ready) + holds,
        problems=rke2_problems(stack, observed, turns, server),
        holds=holds,
    )


def _held_by_a_repair(
    stack: StackConfig, observed: Mapping[str, ObservedNode | None], turns: Mapping[str, Turn]
) -> list[str]:
    """A domain this up must turn while `gpu-pool repair` holds it (repairing, or stopped mid-repair): an up's
    resume would gate and uncordon the node before the repair's own checks ran (FIELD-REVIEW-5 H2)."""
    held = []
    for domain in stack.failure_domains:
        node = observed.get(domain.name)
        if node is None or turns[domain.name].kind in ("none", "first-install") or node.holder_kind != "repair":
            continue
        held.append(
            f"{domain.name} ({domain.hostname}) is held by {node.turn_holder} (gpu-pool.dev/turn-state "
            f"{node.turn_state}): finish that repair first (`gpu-pool repair {domain.hostname} --stack <stack> "
            "--yes`), then `pulumi up` turns it"
        )
    return held
