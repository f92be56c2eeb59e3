"""A domain's turn as plain data, for every change kind and every state its Node can be observed in.

No Pulumi, no mocks: `plan_wave` and `plan_domain` are pure functions of the stack and the observed Nodes, and
the component only registers what they return.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest

from components.gpu_failure_domain.node_steps import node_steps_script
from components.gpu_failure_domain.observed import (
    ROLLOUT_ANNOTATION,
    WAVE_CORDON_ANNOTATION,
    WAVE_TURN_ANNOTATION,
    ObservedNode,
)
from components.gpu_failure_domain.plan import (
    CommandStep,
    DomainPlan,
    nodes_by_domain,
    plan_domain,
    plan_wave,
    settled_nodes_of,
)
from components.gpu_failure_domain.rollout import rollout_state
from components.gpu_failure_domain.steps import LocalStep, ScriptStep
from components.gpu_failure_domain.turns import TURN_TABLE, Record, Situation, TurnRule, Wave, turn_for, version_key
from components.stack_check import validate_stack
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.ssh_keys import TEST_PUBLIC_KEY

KEY = TEST_PUBLIC_KEY
OLD, NEW = "v1.33.5+rke2r1", "v1.33.6+rke2r1"
KERNEL = "6.8.0-60-generic"
APT_MIRROR = "http://apt.lab.internal/ubuntu"
Raw = dict[str, Any]


def prod(edit: Callable[[Raw], None] | None = None) -> StackConfig:
    raw = {k.split(":", 1)[1]: v for k, v in copy.deepcopy(read_stack_file("prod")).items()}
    for domain in raw["failureDomains"]:
        domain["sshAuthorizedKeys"] = [KEY]
    if edit:
        edit(raw)
    return validate_stack(raw)


def each_domain(**settings: Any) -> Callable[[Raw], None]:
    def edit(raw: Raw) -> None:
        for domain in raw["failureDomains"]:
            domain.update(settings)

    return edit


# One stack per change kind: (the earlier file's edit, the current file's edit).
CHANGES: dict[str, tuple[Callable[[Raw], None] | None, Callable[[Raw], None] | None]] = {
    "nothing": (None, None),
    "rke2": (None, lambda raw: raw["rke2"].update(version=NEW)),
    "kernel": (each_domain(kernel="6.8.0-59-generic"), each_domain(kernel=KERNEL)),
    "vm": (None, each_domain(cores=12)),
    "driver": (None, lambda raw: raw["gpuOperator"].update(driverVersion="580.173.02")),
    "sharing": (None, lambda raw: raw["sharingProfiles"]["a1000-x4"].update(replicas=2)),
    # A proxy added to domains that exist: cloud-init ran once, so the turn writes the files over SSH.
    "proxy": (None, lambda raw: raw.update(proxy={"https": "http://proxy.lab.internal:3128"})),
    # An apt mirror added, changed or taken out on domains that exist: the same files turn (the release's sources).
    "apt mirror added": (None, lambda raw: raw.update(aptMirror={"uri": APT_MIRROR})),
    "apt mirror changed": (
        lambda raw: raw.update(aptMirror={"uri": APT_MIRROR}),
        lambda raw: raw.update(aptMirror={"uri": APT_MIRROR, "securityUri": "http://security.lab.internal/ubuntu"}),
    ),
    "apt mirror removed": (lambda raw: raw.update(aptMirror={"uri": APT_MIRROR}), None),
}


def settled(stack: StackConfig) -> dict[str, ObservedNode | None]:
    """The Nodes this stack's `up` leaves, read back the way the preview reads the cluster."""
    return nodes_by_domain(stack, settled_nodes_of(stack))


def observe(before: StackConfig, after: StackConfig, state: str) -> dict[str, ObservedNode | None]:
    """dc1 in `state`; dc2 and dc3 serving on the earlier file."""
    nodes = settled(before)
    dc1 = nodes["dc1"]
    assert dc1 is not None
    turn = {WAVE_TURN_ANNOTATION: "2026-12-04T18:00:00Z"}
    nodes["dc1"] = {
        "no Node": None,
        "serving": dc1,
        "serving, upgraded by hand": replace(dc1, kubelet_version=after.rke2.version),
        "cordoned by someone else": replace(dc1, unschedulable=True),
        "from before waves": replace(dc1, rollout=None),
        "a turn in progress": replace(
            dc1, unschedulable=True, wave_cordoned="dc1", wave_turn=turn[WAVE_TURN_ANNOTATION]
        ),
        "a turn in progress, agent restarted": replace(
            dc1,
            unschedulable=True,
            wave_cordoned="dc1",
            wave_turn=turn[WAVE_TURN_ANNOTATION],
            kubelet_version=after.rke2.version,
            kernel_version=after.failure_domains[0].kernel,
        ),
    }[state]
    return nodes


STATES = (
    "no Node",
    "serving",
    "serving, upgraded by hand",
    "cordoned by someone else",
    "from before waves",
    "a turn in progress",
    "a turn in progress, agent restarted",
)

# dc1's turn for each (change, observed state): its kind and the steps that make the turn, in the order they run.
# `power-cycle`, `node-ready`, `gpu-ready` and the smoke test are in every plan; a change to their inputs runs them.
EXPECTED: dict[tuple[str, str], tuple[str, list[str]]] = {}
for change in CHANGES:
    EXPECTED[(change, "no Node")] = ("first-install", [])
    EXPECTED[(change, "a turn in progress")] = ("resume", ["wave-drain", "device-plugin-restart", "wave-gate"])
    EXPECTED[(change, "a turn in progress, agent restarted")] = EXPECTED[(change, "a turn in progress")]
EXPECTED |= {
    ("nothing", "serving"): ("none", []),
    ("nothing", "serving, upgraded by hand"): ("none", []),
    ("nothing", "cordoned by someone else"): ("none", []),
    ("nothing", "from before waves"): ("none", []),
    ("rke2", "serving"): ("roll", ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate"]),
    # The kubelet already runs the pin: nothing to install, but the record says otherwise, so gate and record.
    ("rke2", "serving, upgraded by hand"): ("verify", ["wave-gate"]),
    ("rke2", "cordoned by someone else"): ("roll", ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate"]),
    ("rke2", "from before waves"): ("roll", ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate"]),
    ("rke2", "a turn in progress"): (
        "resume",
        ["rke2-login", "wave-drain", "rke2-upgrade", "device-plugin-restart", "wave-gate"],
    ),
    ("kernel", "serving"): (
        "roll",
        ["kernel-login", "wave-drain", "kernel-install", "kernel-driver-rebuild", "wave-gate"],
    ),
    ("kernel", "serving, upgraded by hand"): EXPECTED.get(("kernel", "serving"), ("", [])),
    ("kernel", "cordoned by someone else"): (
        "roll",
        ["kernel-login", "wave-drain", "kernel-install", "kernel-driver-rebuild", "wave-gate"],
    ),
    ("kernel", "from before waves"): (
        "roll",
        ["kernel-login", "wave-drain", "kernel-install", "kernel-driver-rebuild", "wave-gate"],
    ),
    ("kernel", "a turn in progress"): (
        "resume",
        ["kernel-login", "wave-drain", "device-plugin-restart", "kernel-install", "kernel-driver-rebuild", "wave-gate"],
    ),
    # Rebooted into the new kernel before the rebuild failed: rebuild, no second install.
    ("kernel", "a turn in progress, agent restarted"): (
        "resume",
        ["wave-drain", "device-plugin-restart", "kernel-driver-rebuild", "wave-gate"],
    ),
    ("vm", "serving"): ("roll", ["wave-drain", "wave-gate"]),
    ("vm", "serving, upgraded by hand"): ("roll", ["wave-drain", "wave-gate"]),
    ("vm", "cordoned by someone else"): ("roll", ["wave-drain", "wave-gate"]),
    ("vm", "from before waves"): ("none", []),
    ("driver", "serving"): ("roll", ["wave-drain", "wave-gate"]),
    ("driver", "serving, upgraded by hand"): ("roll", ["wave-drain", "wave-gate"]),
    ("driver", "cordoned by someone else"): ("roll", ["wave-drain", "wave-gate"]),
    ("driver", "from before waves"): ("none", []),
    ("sharing", "serving"): ("roll", ["wave-drain", "device-plugin-restart", "wave-gate"]),
    ("sharing", "serving, upgraded by hand"): ("roll", ["wave-drain", "device-plugin-restart", "wave-gate"]),
    ("sharing", "cordoned by someone else"): ("roll", ["wave-drain", "device-plugin-restart", "wave-gate"]),
    ("sharing", "from before waves"): ("none", []),
    ("proxy", "serving"): ("roll", ["rke2-login", "wave-drain", "rke2-files", "wave-gate"]),
    ("proxy", "serving, upgraded by hand"): ("roll", ["rke2-login", "wave-drain", "rke2-files", "wave-gate"]),
    ("proxy", "cordoned by someone else"): ("roll", ["rke2-login", "wave-drain", "rke2-files", "wave-gate"]),
    # Nothing on the cluster shows the files: a Node from before waves gets them written.
    ("proxy", "from before waves"): ("roll", ["rke2-login", "wave-drain", "rke2-files", "wave-gate"]),
    ("proxy", "a turn in progress"): (
        "resume",
        ["rke2-login", "wave-drain", "rke2-files", "device-plugin-restart", "wave-gate"],
    ),
    ("proxy", "a turn in progress, agent restarted"): (
        "resume",
        ["rke2-login", "wave-drain", "rke2-files", "device-plugin-restart", "wave-gate"],
    ),
}
for change in ("apt mirror added", "apt mirror changed", "apt mirror removed"):
    EXPECTED |= {(change, state): EXPECTED[("proxy", state)] for state in STATES}
# A Node from before waves records nothing, and a stack with no egress settings left asks for no files: nothing
# to write (apt mirrors came after waves, so such a node never had one from gpu-pool).
EXPECTED[("apt mirror removed", "from before waves")] = ("none", [])
EXPECTED[("kernel", "serving, upgraded by hand")] = EXPECTED[("kernel", "serving")]
# "upgraded by hand" is about the kubelet; a change that is not RKE2's still rolls on such a node, and the turn
# records the RKE2 release the node runs as well.
EXPECTED[("nothing", "serving, upgraded by hand")] = ("none", [])


def scenario(change: str, state: str) -> tuple[StackConfig, Wave, DomainPlan]:
    earlier, current = CHANGES[change]
    before, after = prod(earlier), prod(current)
    wave = plan_wave(after, observe(before, after, state))
    return after, wave, plan_domain(after.failure_domains[0], after, wave.turns["dc1"])


def turn_steps(plan: DomainPlan) -> list[str]:
    return [step.name for step in plan.steps if step.turn_step]


@pytest.mark.parametrize(("change", "state"), list(itertools.product(CHANGES, STATES)), ids=lambda v: str(v))
def test_each_change_in_each_observed_state_plans_the_turn_that_state_needs(change: str, state: str) -> None:
    _, _, plan = scenario(change, state)
    kind, steps = EXPECTED[(change, state)]
    assert (plan.turn.kind, turn_steps(plan)) == (kind, steps), plan.turn.why()


@pytest.mark.parametrize(("change", "state"), list(itertools.product(CHANGES, STATES)), ids=lambda v: str(v))
def test_every_plan_runs_its_steps_in_an_order_where_each_waits_only_for_earlier_ones(change: str, state: str) -> None:
    _, _, plan = scenario(change, state)
    seen: set[str] = set()
    for step in plan.steps:
        assert set(step.waits_for) <= seen, (step.name, step.waits_for)
        seen.add(step.name)
    assert plan.steps[-1].name == "rollout"


@pytest.mark.parametrize(("change", "state"), list(itertools.product(CHANGES, STATES)), ids=lambda v: str(v))
def test_no_step_sends_its_create_command_again_as_its_update(change: str, state: str) -> None:
    # pulumi-command runs `create` on an update when no `update` is given; the node-steps script twice per step
    # was a third of every preview's bytes (docs/engine.md).
    _, _, plan = scenario(change, state)
    repeated = [
        step.name for step in plan.steps if isinstance(step, CommandStep) and step.command.update == step.command.create
    ]
    assert not repeated, f"steps sending their create again as update: {repeated}"


def waits_transitively(plan: DomainPlan, later: str, earlier: str) -> bool:
    pending, seen = [later], set()
    while pending:
        name = pending.pop()
        if name == earlier:
            return True
        if name not in seen:
            seen.add(name)
            pending += list(plan.step(name).waits_for)
    return False


@pytest.mark.parametrize(("change", "state"), list(itertools.product(CHANGES, STATES)), ids=lambda v: str(v))
def test_no_turn_uncordons_a_node_before_its_gate_and_only_its_last_step_uncordons(change: str, state: str) -> None:
    _, _, plan = scenario(change, state)
    script = node_steps_script()
    # The node-steps script's ends (node/turn.py finish_rollout, finish_repair) uncordon what the turn cordoned; a
    # shell step would say so in its text.
    ends = (ScriptStep.ROLLOUT, ScriptStep.REPAIR_DONE)
    uncordons = [
        step.name
        for step in plan.steps
        if isinstance(step, CommandStep)
        and (
            step.command.environment.get("GPU_POOL_STEP") in ends
            if step.command.create == script
            else ("uncordon" in step.command.create or '"unschedulable": null' in step.command.create)
        )
    ]
    assert uncordons == ["rollout"]
    # The node steps' script uncordons only after a power cycle of a node it found schedulable; in a turn the
    # power cycle waits for the drain, which cordoned the node (tests/e2e/test_node_steps.py runs both cases).
    if plan.turn.drains:
        assert waits_transitively(plan, "power-cycle", "wave-drain")
    if plan.turn.gated:
        assert waits_transitively(plan, "rollout", "wave-gate")
        assert waits_transitively(plan, "wave-gate", "power-cycle")
        assert waits_transitively(plan, "wave-gate", "cuda-smoke-test")


@pytest.mark.parametrize(("change", "state"), list(itertools.product(CHANGES, STATES)), ids=lambda v: str(v))
def test_every_ssh_login_a_turn_needs_is_proven_before_its_drain_and_nothing_disruptive_runs_before_it(
    change: str, state: str
) -> None:
    _, _, plan = scenario(change, state)
    if not plan.turn.drains:
        assert not [s.name for s in plan.steps if s.after_previous_batch]
        return
    remote = [step.name for step in plan.steps if step.kind == "remote"]
    logins = [name for name in remote if name.endswith("-login")]
    for name in logins:
        assert waits_transitively(plan, "wave-drain", name)
    for name in remote:
        if name not in logins:
            assert waits_transitively(plan, name, "wave-drain"), name
    # Only the turn's first steps wait for the previous batch; everything disruptive comes after the drain.
    assert {s.name for s in plan.steps if s.after_previous_batch} == {"wave-drain", *logins}
    for name in ("rke2-upgrade", "device-plugin-restart", "kernel-install", "kernel-driver-rebuild", "power-cycle"):
        if name in plan.names:
            assert waits_transitively(plan, name, "wave-drain"), name


def test_a_failed_rke2_wave_resumes_at_the_failed_domain_even_with_its_kubelet_on_the_new_release() -> None:
    """FIELD-REVIEW-4 WRONG-1: the restarted agent reports the new kubelet; dc1 is still the wave's to finish."""
    after, wave, plan = scenario("rke2", "a turn in progress, agent restarted")
    assert plan.turn.kind == "resume" and not plan.turn.install_rke2
    assert wave.batches == [["dc1"], ["dc2"], ["dc3"]]
    assert wave.previous("dc2") == ["dc1"]
    dc2 = plan_domain(after.failure_domains[1], after, wave.turns["dc2"])
    assert dc2.step("wave-drain").after_previous_batch and dc2.step("rke2-login").after_previous_batch
    # The resumed turn is keyed on the drain that started it: its steps run again, the gate first.
    gate, done = plan.step_of("wave-gate", LocalStep).command, plan.step_of("rollout", LocalStep).command
    assert gate is not None and done is not None
    assert "2026-12-04T18:00:00Z" in gate.triggers[0]
    # Its last step records a new state, so it runs without the token, and the next plan leaves it as it is.
    assert "GPU_POOL_RESUMED_TURN" not in done.environment
    settled_plan = plan_domain(after.failure_domains[0], after, plan_wave(after, settled(after)).turns["dc1"])
    assert settled_plan.step_of("rollout", LocalStep).command == done


def test_a_resumed_turn_that_rolls_a_change_leaves_no_rollout_change_for_the_next_up() -> None:
    """After a wave stopped at dc1 and resumed to its end, the next preview was not clean: the resumed turn's token
    stayed in dc1-rollout's inputs, and the next `up` ran the record again outside any turn (found by
    tests/e2e/test_driver_wave_adversity.py)."""
    for change in CHANGES:
        after, _, plan = scenario(change, "a turn in progress, agent restarted")
        if plan.turn.kind != "resume" or not plan.turn.changes:
            continue
        settled_plan = plan_domain(after.failure_domains[0], after, plan_wave(after, settled(after)).turns["dc1"])
        assert settled_plan.step_of("rollout", LocalStep).command == plan.step_of("rollout", LocalStep).command, change


def test_a_driver_bump_drains_each_domain_only_after_the_operators_new_release_one_domain_at_a_time() -> None:
    """FIELD-REVIEW-4 WRONG-3: the operator upgrades the node the wave cordons, so the wave must cordon after the
    release is in (its upgrade slots: tests/gpu_platform/test_operator_values.py)."""
    _, wave, plan = scenario("driver", "serving")
    assert wave.batches == [["dc1"], ["dc2"], ["dc3"]]
    assert plan.step("wave-drain").platform == ("operator",)
    assert plan.step("wave-gate").platform == ("operator",)


def test_a_reverted_change_on_a_node_the_wave_cordoned_gates_and_uncordons_it() -> None:
    """FIELD-REVIEW-4 WRONG-2: the sharing edit is reverted while dc1 is the wave's; dc1 is not left cordoned."""
    before = prod()
    nodes = settled(before)
    assert nodes["dc1"] is not None
    nodes["dc1"] = replace(nodes["dc1"], unschedulable=True, wave_cordoned="dc1", wave_turn="2026-12-04T18:00:00Z")
    wave = plan_wave(before, nodes)
    plan = plan_domain(before.failure_domains[0], before, wave.turns["dc1"])
    assert plan.turn.kind == "resume" and plan.turn.changes == ()
    # The plugin and GFD read the reverted profile again, the gate checks the slots, the last step uncordons.
    assert turn_steps(plan) == ["wave-drain", "device-plugin-restart", "wave-gate"]
    assert plan.turn.uncordons
    assert wave.batches == [["dc1"]] and wave.changes == {"dc1": []}
    # The record it writes equals the last one: the attempt's token makes its last step run, to uncordon dc1.
    done = plan.step_of("rollout", LocalStep).command
    assert done is not None and done.environment["GPU_POOL_RESUMED_TURN"] == "2026-12-04T18:00:00Z"


def test_a_node_someone_else_cordoned_is_changed_and_gated_but_stays_cordoned_and_the_plan_says_so() -> None:
    _, wave, plan = scenario("sharing", "cordoned by someone else")
    assert not plan.turn.uncordons
    assert "stays cordoned" in plan.step("rollout").does
    assert "someone else cordoned it" in plan.turn.why()
    # It is out already, so it goes first; the others follow one at a time.
    assert wave.batches == [["dc1"], ["dc2"]]


def test_domains_already_out_go_first_whatever_rollout_order_says() -> None:
    before = prod()
    after = prod(lambda raw: raw.update(rke2={**raw["rke2"], "version": NEW}, rollout={"order": ["dc3", "dc2"]}))
    nodes = settled(before)
    assert nodes["dc1"] is not None
    nodes["dc1"] = replace(nodes["dc1"], unschedulable=True, wave_cordoned="dc1", wave_turn="t")
    assert plan_wave(after, nodes).batches == [["dc1"], ["dc3"], ["dc2"]]


def test_the_capacity_timeline_follows_the_wave_and_a_point_with_no_gpu_is_a_danger() -> None:
    after = prod(lambda raw: raw["rke2"].update(version=NEW))
    wave = plan_wave(after, settled(prod()))
    assert [(p.out, p.slots) for p in wave.capacity] == [
        ((), 9),
        (("dc1",), 5),
        (("dc2",), 5),
        (("dc3",), 8),
        ((), 9),
    ]
    assert wave.dangers == []

    everything = prod(lambda raw: raw.update(rke2={**raw["rke2"], "version": NEW}, rollout={"maxUnavailable": 3}))
    wave = plan_wave(everything, settled(prod()))
    assert wave.batches == [["dc1", "dc2", "dc3"]]
    assert [(p.out, p.slots) for p in wave.capacity][1] == (("dc1", "dc2", "dc3"), 0)
    assert len(wave.dangers) == 2
    assert "gpu-pool:rollout.maxUnavailable is 3 with 3 failure domains" in wave.dangers[0]
    assert "the pool has no schedulable GPU while dc1, dc2, dc3 are out" in wave.dangers[1]


def test_max_unavailable_at_the_pool_size_is_a_danger_even_with_nothing_to_roll() -> None:
    stack = prod(lambda raw: raw.update(rollout={"maxUnavailable": 3}))
    wave = plan_wave(stack, settled(stack))
    assert wave.batches == [] and wave.active
    assert wave.dangers[0].startswith("gpu-pool:rollout.maxUnavailable is 3 with 3 failure domains")


def test_a_node_someone_else_keeps_cordoned_makes_two_domains_out_at_once_a_danger() -> None:
    after = prod(lambda raw: raw["gpuOperator"].update(driverVersion="580.173.02"))
    nodes = settled(prod())
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(nodes["dc2"], unschedulable=True)
    wave = plan_wave(after, nodes)
    assert wave.batches == [["dc2"], ["dc1"], ["dc3"]]
    assert [(p.out, p.slots) for p in wave.capacity][2] == (("dc1", "dc2"), 1)
    assert wave.dangers == [
        "dc2 is cordoned by someone else and stays out, so this wave has 2 domains out at once while "
        "gpu-pool:rollout.maxUnavailable is 1: uncordon it first, or roll this change later"
    ]


@pytest.mark.parametrize(
    ("running", "refused"),
    [
        ("v1.33.7+rke2r1", True),
        ("v1.33.6+rke2r2", True),
        ("v1.33.6+rke2r1", False),
        ("v1.33.5+rke2r1", False),
        ("v1.32.9+rke2r1", False),
    ],
    ids=["a patch downgrade", "a revision downgrade", "the same release", "a patch upgrade", "a minor upgrade"],
)
def test_an_rke2_pin_older_than_a_worker_runs_is_refused_to_the_patch_and_revision(running: str, refused: bool) -> None:
    """FIELD-REVIEW-4 WRONG-7: the full version is compared, not only major.minor."""
    after = prod(lambda raw: raw["rke2"].update(version=NEW))
    nodes = settled(prod())
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(nodes["dc2"], kubelet_version=running)
    problems = plan_wave(after, nodes).problems
    assert bool(problems) == refused, problems
    if refused:
        assert problems == [
            f"gpu-pool:rke2.version: {NEW} is older than {running}, which domain dc2 runs; RKE2 does not downgrade "
            f"a node in place (its patch and rke2r revision count too): pin {running} or newer, or roll that node "
            "back by RKE2's own procedure first (https://docs.rke2.io/upgrades/roll-back)"
        ]


def observed_as(rule: TurnRule) -> tuple[StackConfig, ObservedNode | None]:
    """A stack and dc1's Node in the row's situation, the stack against its record as the row says."""
    before = prod()
    after = prod(None if rule.record in ("-", "equal") else lambda raw: raw["rke2"].update(version=NEW))
    node = settled(before)["dc1"]
    assert node is not None
    if rule.situation == "no Node":
        return after, None
    if rule.record == "differs, already running":
        node = replace(node, kubelet_version=NEW)
    if rule.situation == "cordoned by someone else":
        node = replace(node, unschedulable=True)
    if rule.situation == "a turn in progress":
        node = replace(node, unschedulable=True, wave_cordoned="dc1", wave_turn="2026-12-04T18:00:00Z")
    if rule.situation == "not Ready":
        node = replace(node, ready=False)
    return after, node


@pytest.mark.parametrize("rule", TURN_TABLE, ids=lambda rule: f"{rule.situation}, {rule.record}")
def test_each_row_of_the_turn_table_is_the_turn_a_node_so_observed_gets(rule: TurnRule) -> None:
    stack, node = observed_as(rule)
    turn = turn_for(stack.failure_domains[0], stack, node)
    assert (turn.situation, turn.kind) == (rule.situation, rule.kind), turn.why()


def test_the_turn_table_has_one_row_for_each_situation_and_each_way_the_record_compares() -> None:
    situations: tuple[Situation, ...] = get_args(Situation)
    records: tuple[Record, ...] = get_args(Record)
    expected = [("no Node", "-")] + [(situation, record) for situation in situations[1:] for record in records[1:]]
    assert sorted((rule.situation, rule.record) for rule in TURN_TABLE) == sorted(expected)


def test_the_turn_table_in_docs_diff_is_the_one_the_plan_reads() -> None:
    rows = [f"| {rule.situation} | {rule.record} | `{rule.kind}` | {rule.does} |" for rule in TURN_TABLE]
    table = "\n".join(
        ["| the Node | the stack against what it records | the turn | what runs |", "|---|---|---|---|", *rows]
    )
    docs = (Path(__file__).resolve().parents[2] / "docs" / "diff.md").read_text(encoding="utf-8")
    assert table + "\n" in docs, "docs/diff.md's turn table differs from TURN_TABLE; write it as:\n" + table


def test_versions_compare_by_release_and_rke2_revision() -> None:
    assert version_key("v1.33.6+rke2r2") == (1, 33, 6, 2)
    assert version_key("v1.33.6") == (1, 33, 6, 0)
    assert version_key("not a version") is None


def test_a_removed_domain_is_drained_before_its_vm_stops_protected_or_not() -> None:
    stack = prod()
    plan = plan_domain(stack.failure_domains[2], stack, plan_wave(stack, settled(stack)).turns["dc3"])
    retire = plan.step_of("retire", LocalStep)
    # Deletes run dependents first: a step that waits for the VM is deleted, and so drains, before the VM.
    assert retire.waits_for == ("vm",) and retire.command is not None
    assert retire.command.delete == (
        "if kubectl get node rke2-worker-dc3-gpu-a >/dev/null 2>&1; then kubectl drain rke2-worker-dc3-gpu-a "
        "--ignore-daemonsets --delete-emptydir-data --timeout=15m; fi"
    )
    # Nothing ties it to the VM's id: a replaced VM would otherwise drain the new node by name.
    assert retire.command.id_triggers == () and retire.command.triggers == ()


def test_observed_nodes_are_read_from_kubectl_get_nodes_including_the_turn_marks() -> None:
    stack = prod()
    listing = settled_nodes_of(stack)
    item = listing["items"][0]
    item["spec"]["unschedulable"] = True
    item["metadata"]["annotations"] |= {WAVE_CORDON_ANNOTATION: "dc1", WAVE_TURN_ANNOTATION: "2026-12-04T18:00:00Z"}
    listing["items"].append({"metadata": {"name": "someone-elses-node"}})
    del listing["items"][2]
    nodes = nodes_by_domain(stack, listing)
    assert nodes["dc3"] is None
    assert nodes["dc1"] == ObservedNode(
        rollout=rollout_state(stack.failure_domains[0], stack),
        kubelet_version=OLD,
        kernel_version=None,
        unschedulable=True,
        wave_cordoned="dc1",
        wave_turn="2026-12-04T18:00:00Z",
    )
    assert nodes["dc1"].turn_in_progress and not nodes["dc1"].cordoned_by_someone_else
    assert json.loads(item["metadata"]["annotations"][ROLLOUT_ANNOTATION]) == rollout_state(
        stack.failure_domains[0], stack
    )


def test_a_node_that_is_not_ready_is_out_goes_first_and_the_plan_says_its_turn_stops_before_the_drain() -> None:
    """FIELD-REVIEW-5 WRONG-3 as reproduced: dc2's Ready condition Unknown, not cordoned, a sharing change. It used
    to be planned as serving, second in the wave, with the capacity line counting its slots and "Dangers: none"."""
    before = prod()
    after = prod(lambda raw: raw["sharingProfiles"]["a1000-x4"].update(replicas=2))
    nodes = settled(before)
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(nodes["dc2"], ready=False)
    wave = plan_wave(after, nodes)

    assert wave.batches == [["dc2"], ["dc1"]]
    assert wave.capacity[0].out == ("dc2",)
    assert wave.capacity[0].slots == sum(after.slots(d) for d in after.failure_domains if d.name != "dc2")
    assert wave.turns["dc2"].situation == "not Ready" and wave.turns["dc2"].drains
    assert "its turn stops before the drain" in wave.turns["dc2"].why()
    assert wave.dangers == [
        "dc2 is not Ready: its turn stops before the drain and the wave stops there unless it is Ready by then "
        "(`gpu-pool repair <node> --stack <stack>`, or wait for Ready; `pulumi up` again resumes)"
    ]


def test_draining_a_domain_while_another_is_not_ready_beyond_max_unavailable_is_a_danger() -> None:
    before = prod()
    # A change of dc1 alone: dc2, not Ready, has no turn and stays out the whole wave.
    after = prod(lambda raw: raw["failureDomains"][0].update(cores=12))
    nodes = settled(before)
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(nodes["dc2"], ready=False)
    wave = plan_wave(after, nodes)

    assert wave.batches == [["dc1"]]
    assert [p.out for p in wave.capacity] == [("dc2",), ("dc1", "dc2"), ("dc2",)]
    assert wave.dangers == [
        "dc2 is not Ready (the kubelet does not report) and counts as out, so this wave has 2 domains out at once "
        "while gpu-pool:rollout.maxUnavailable is 1: bring it back first (`gpu-pool repair <node> --stack <stack>`, "
        "or wait for Ready), or roll this change later"
    ]
    # With room for two out at once it is no danger.
    roomy = prod(lambda raw: raw.update(rollout={"maxUnavailable": 2}) or raw["failureDomains"][0].update(cores=12))
    assert plan_wave(roomy, nodes).dangers == []


def test_an_up_that_must_turn_a_domain_a_repair_holds_is_refused_naming_the_repair() -> None:
    """FIELD-REVIEW-5 H2, up during a repair: the up planned the repair's node as `resume`, gated and uncordoned it
    before the repair's own node-check and smoke test ran."""
    after = prod(lambda raw: raw["rke2"].update(version=NEW))
    nodes = settled(prod())
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(
        nodes["dc2"],
        unschedulable=True,
        wave_cordoned="dc2",
        wave_turn="2026-12-05T10:00:00Z",
        turn_state="repairing",
        turn_holder="repair:alice@laptop since 2026-12-05T10:00:00Z",
    )
    wave = plan_wave(after, nodes)

    (held,) = wave.holds
    assert held.startswith(
        "dc2 (rke2-worker-dc2-gpu-a) is held by repair:alice@laptop since 2026-12-05T10:00:00Z "
        "(gpu-pool.dev/turn-state repairing)"
    )
    assert "`gpu-pool repair rke2-worker-dc2-gpu-a --stack <stack> --yes`" in held
    # make diff shows it as a danger.
    assert held in wave.dangers


def test_a_domain_a_repair_holds_but_this_up_does_not_turn_is_no_refusal() -> None:
    stack = prod()
    nodes = settled(stack)
    assert nodes["dc2"] is not None
    nodes["dc2"] = replace(nodes["dc2"], turn_state="repairing", turn_holder="repair:alice@laptop since t")
    assert plan_wave(stack, nodes).holds == []


def test_the_turn_state_and_holder_are_read_from_the_node() -> None:
    from components.gpu_failure_domain.observed import observed_node

    stack = prod()
    item = settled_nodes_of(stack)["items"][0]
    item["metadata"]["labels"]["gpu-pool.dev/turn-state"] = "gating"
    item["metadata"]["annotations"]["gpu-pool.dev/turn-holder"] = "up:prod since 2026-12-05T10:00:00Z"
    node = observed_node(item)

    assert (node.turn_state, node.held, node.holder_kind) == ("gating", True, "up")
