"""A repair is one more kind of turn: planned by `plan_domain` from the observed Node like a wave's turns, with the
step names `make diff` uses, and ending as every turn ends (the node uncordoned only where the turn cordoned it).
Plain data, no mocks."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from components.gpu_failure_domain.observed import ROLLOUT_ANNOTATION, ObservedNode
from components.gpu_failure_domain.plan import Command, CommandStep, DomainPlan, plan_domain, repair_turn
from components.gpu_failure_domain.steps import LocalStep, RemoteStep, RepairSmokeStep, SmokeJobStep
from components.gpu_failure_domain.turns import Turn
from tests.gpu_failure_domain.test_plan import prod, settled

REASON = "node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus"
AT = "2026-12-04T10:00:00Z"
CHECK = Command("node-check over ssh", interpreter=None)


def repair(state: str = "serving", *, node_check: Command | None = None, at: str = AT) -> DomainPlan:
    stack = prod()
    domain = stack.failure_domains[1]
    node = settled(stack)["dc2"]
    assert node is not None
    observed: ObservedNode = {
        "serving": node,
        "cordoned by someone else": replace(node, unschedulable=True),
        "a turn in progress": replace(node, unschedulable=True, wave_cordoned="dc2", wave_turn="2026-12-04T09:00:00Z"),
        "a turn in progress, cordoned by someone else": replace(
            node, unschedulable=True, wave_turn="2026-12-04T09:00:00Z"
        ),
    }[state]
    return plan_domain(domain, stack, repair_turn(domain, observed, REASON, at), node_check=node_check)


def test_a_repair_drains_power_cycles_gates_smoke_tests_and_ends_the_turn_in_that_order() -> None:
    plan = repair()

    assert [step.name for step in plan.turn_steps()] == [
        "wave-drain", "power-cycle", "node-ready", "gpu-ready", "cuda-smoke-test", "wave-gate", "rollout",
    ]  # fmt: skip
    assert plan.turn.kind == "repair" and plan.turn.drains and plan.turn.gated


def test_with_ssh_node_check_runs_again_after_the_node_is_back_and_before_the_gate() -> None:
    plan = repair(node_check=CHECK)
    names = [step.name for step in plan.turn_steps()]

    assert names.index("node-ready") < names.index("node-check") < names.index("gpu-ready")
    assert plan.step("node-check").kind == "remote" and plan.step_of("node-check", RemoteStep).command == CHECK
    assert "node-check" in plan.step("gpu-ready").waits_for


def test_the_turns_steps_wait_for_each_other_in_the_order_they_run() -> None:
    plan = repair(node_check=CHECK)
    steps = plan.turn_steps()
    for earlier, later in itertools.pairwise(steps):
        # Every step of the turn runs after the one before it, directly or through the domain's other steps.
        seen, todo = set(), list(later.waits_for)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += list(plan.step(name).waits_for)
        assert earlier.name in seen, f"{later.name} does not wait for {earlier.name}"


def test_the_power_cycle_is_forced_with_the_reason_whatever_proxmox_has_pending() -> None:
    cycle = repair().step_of("power-cycle", LocalStep)

    assert cycle.command is not None
    assert cycle.command.environment["POWER_CYCLE_REASON"] == REASON
    assert cycle.command.proxmox_credentials
    assert cycle.does == "stop and start VM 4201 on pve-dc2 through the Proxmox API (recorded on the Node)"


def test_a_waves_power_cycle_is_never_forced() -> None:
    stack = prod()
    for domain in stack.failure_domains:
        node = settled(stack)[domain.name]
        assert node is not None
        for turn in (Turn(domain.name, "roll", "serving", ("vm",)), Turn(domain.name, "none", "serving")):
            command = plan_domain(domain, stack, turn).step_of("power-cycle", LocalStep).command
            assert command is not None and "POWER_CYCLE_REASON" not in command.environment


def test_the_smoke_test_runs_again_under_a_job_name_of_the_repairs_own() -> None:
    plan = repair()
    stack_job = plan_domain(prod().failure_domains[1], prod(), Turn("dc2", "none", "serving")).step_of(
        "cuda-smoke-test", SmokeJobStep
    )
    again = plan.step_of("cuda-smoke-test", RepairSmokeStep)

    assert stack_job.manifest is not None and again.manifest is not None and again.command is not None
    name = again.manifest["metadata"]["name"]
    assert name.startswith(stack_job.manifest["metadata"]["name"] + "-repair-") and len(name) <= 63
    assert json.loads(again.command.environment["SMOKE_JOB"]) == again.manifest
    assert again.manifest["spec"]["template"] == stack_job.manifest["spec"]["template"]
    assert again.manifest["metadata"]["labels"] == stack_job.manifest["metadata"]["labels"]
    assert again.manifest["metadata"]["annotations"]["gpu-pool/repair"] == REASON
    assert (
        repair(at="2026-12-05T10:00:00Z").step_of("cuda-smoke-test", RepairSmokeStep).manifest["metadata"]["name"]
        != name
    )


def test_a_repair_never_writes_the_rollout_record() -> None:
    plan = repair()
    for step in plan.turn_steps():
        assert isinstance(step, CommandStep)
        assert ROLLOUT_ANNOTATION not in step.command.create + json.dumps(dict(step.command.environment))
    assert plan.step_of("rollout", LocalStep).command.environment["GPU_POOL_STEP"] == "repair-done"


@pytest.mark.parametrize(
    ("state", "uncordons"),
    [
        ("serving", True),
        ("cordoned by someone else", False),
        ("a turn in progress", True),
        ("a turn in progress, cordoned by someone else", False),
    ],
)
def test_a_repair_uncordons_only_a_node_the_wave_or_the_repair_cordoned(state: str, uncordons: bool) -> None:
    plan = repair(state)

    assert plan.turn.uncordons is uncordons
    assert plan.step("rollout").does.endswith(
        ", uncordon" if uncordons else "; the node stays cordoned (cordoned by someone else)"
    )


def test_without_the_smoke_test_the_repair_gates_on_the_pins_alone() -> None:
    stack = prod(lambda raw: raw.update(smokeTest={"enabled": False}))
    domain = stack.failure_domains[1]
    node = settled(stack)["dc2"]
    assert node is not None

    plan = plan_domain(domain, stack, repair_turn(domain, node, REASON, AT))

    assert [step.name for step in plan.turn_steps()] == [
        "wave-drain",
        "power-cycle",
        "node-ready",
        "wave-gate",
        "rollout",
    ]


def test_a_repair_run_again_after_a_stop_says_why_the_earlier_attempt_stopped() -> None:
    stack = prod()
    domain = stack.failure_domains[1]
    node = settled(stack)["dc2"]
    assert node is not None
    why = "repair stopped at gpu-ready at 2026-12-04T09:10:00Z: the driver upgrade failed; resume: gpu-pool repair"
    stopped = replace(node, unschedulable=True, wave_cordoned="dc2", wave_turn="2026-12-04T09:00:00Z", wave_stopped=why)

    turn = repair_turn(domain, stopped, REASON, AT)

    assert turn.stopped == why
    assert turn.why().startswith(f"a turn in progress ({why}); {REASON}: drain, power-cycle the VM")
    # A note left on a node no turn holds any more is not this repair's past.
    assert repair_turn(domain, replace(node, wave_stopped=why), REASON, AT).stopped == ""


def test_no_repair_step_sends_its_create_command_again_as_its_update() -> None:
    plan = repair(node_check=CHECK)
    assert not [
        step.name for step in plan.steps if isinstance(step, CommandStep) and step.command.update == step.command.create
    ]
