"""`gpu-pool repair`'s decision and guard rails as pure data: for every floor, whether a power cycle of the VM is
the fix; for every guard rail, the one sentence that refuses.

The node's floors are walked for real on the lent H200's capture (tests/fixtures/node_check/h200), each broken
variant derived from it in memory, for dc2 of the H200 lab (examples/day2/Pulumi.h200-lab.yaml: prod with dc2 on
that H200, so doctor's re-check of the report against the stack and the Node holds); the cluster's floors come
from doctor's own walk of the example dumps.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import ObservedNode
from components.gpu_failure_domain.plan import nodes_by_domain, settled_nodes_of
from components.stack_check import validate_stack
from config.stack import StackConfig
from day2.doctor import walk as doctor
from day2.doctor.floors_types import Fix
from day2.doctor.node_report import NodeCheck, parse_node_check
from day2.doctor.walk import Diagnosis, diagnose
from day2.node_check.facts import NodeFacts, read_devices, read_kernel_log, read_module, read_nvml_json
from day2.node_check.floors import Expected, Floor, report_json, walk
from day2.pool import facts_of
from day2.repair.decide import decide, power_cycles_within_a_day, refusals, vm_problem
from day2.sources import load_dump
from offline.runner import read_stack_file

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
EXAMPLES = ROOT / "examples" / "day2"
NODE = "rke2-worker-dc2-gpu-a"
EXPECTED = Expected(
    ids=("10de:2335",), subsystems=("10de:18bf",), driver="580.159.04", proxmox_node="pve-dc2", vm_id=4201
)
NOW = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)


def h200() -> NodeFacts:
    return NodeFacts(
        devices=read_devices(H200 / "sys"),
        module=read_module(H200 / "sys", H200 / "proc", H200),
        kernel_log=read_kernel_log(H200 / "dmesg.txt"),
        nvml=read_nvml_json(H200 / "nvml.json"),
        nvml_missing=None,
    )


def xid(code: int) -> str:
    return f"[ 9000.000000] NVRM: Xid (PCI:0000:00:06): {code}, pid=4242, name=python3, event"


def with_log(*lines: str) -> Callable[[NodeFacts], NodeFacts]:
    return lambda facts: replace(facts, kernel_log=(*(facts.kernel_log or ()), *lines))


def with_gpu(**fields: Any) -> Callable[[NodeFacts], NodeFacts]:
    def edit(facts: NodeFacts) -> NodeFacts:
        reading = json.loads(json.dumps(facts.nvml))
        reading["gpus"][0].update(fields)
        return replace(facts, nvml=reading)

    return edit


def with_card(**fields: Any) -> Callable[[NodeFacts], NodeFacts]:
    return lambda facts: replace(facts, devices=tuple(replace(d, **fields) for d in facts.devices))


def nvml_without_the_card(facts: NodeFacts) -> NodeFacts:
    reading = json.loads(json.dumps(facts.nvml))
    reading["gpus"] = []
    return replace(facts, nvml=reading)


def nvml_driver(version: str) -> Callable[[NodeFacts], NodeFacts]:
    def edit(facts: NodeFacts) -> NodeFacts:
        reading = json.loads(json.dumps(facts.nvml))
        reading["driver"] = version
        return replace(facts, nvml=reading)

    return edit


def unassigned_bar(facts: NodeFacts) -> NodeFacts:
    card = facts.devices[0]
    bars = tuple(replace(b, start=0, end=0) if b.index == 2 else b for b in card.bars)
    return replace(facts, devices=(replace(card, bars=bars), *facts.devices[1:]))


# Every way node-check finds the node broken, and whether `gpu-pool repair` power-cycles the VM for it.
NODE_CASES: dict[str, tuple[Callable[[NodeFacts], NodeFacts], Expected, str, bool]] = {
    "card missing from the bus": (lambda f: replace(f, devices=()), EXPECTED, "pci", True),
    # A real H100 where the stack names an H200: a power cycle does not change a card's model (FIELD-REVIEW-6).
    "a card of another model where the stack's should be": (
        lambda f: f,
        replace(EXPECTED, ids=("10de:2330",), subsystems=()),
        "pci",
        False,
    ),
    "another board than the stack's": (lambda f: f, replace(EXPECTED, subsystems=("10de:1757",)), "pci", False),
    "a BAR the firmware could not map": (unassigned_bar, EXPECTED, "pci", False),
    "a link trained narrower": (with_card(current_link_width=8), EXPECTED, "link", False),
    "vfio-pci inside the guest": (with_card(driver="vfio-pci"), EXPECTED, "driver", False),
    "nouveau": (with_card(driver="nouveau"), EXPECTED, "driver", False),
    "no driver bound (the driver container's build)": (with_card(driver=None), EXPECTED, "driver", False),
    "another driver than the pin": (lambda f: f, replace(EXPECTED, driver="595.91.07"), "driver", False),
    "NVML and the module differ (trap 7)": (nvml_driver("580.95.05"), EXPECTED, "nvml", False),
    "a driver that cannot initialise the card": (nvml_without_the_card, EXPECTED, "nvml", True),
    "a vGPU, not the whole card": (with_gpu(virtualizationMode=3), EXPECTED, "nvml", False),
    "Xid 79, fallen off the bus": (with_log(xid(79)), EXPECTED, "health", True),
    "Xid 48, double-bit ECC": (with_log(xid(48)), EXPECTED, "health", True),
    "Xid 95, uncontained ECC": (with_log(xid(95)), EXPECTED, "health", True),
    "Xid 119, GSP RPC timeout": (with_log(xid(119)), EXPECTED, "health", True),
    "Xid 61, a support case": (with_log(xid(61)), EXPECTED, "health", False),
    "an Xid not in the catalogue": (with_log(xid(999)), EXPECTED, "health", False),
    "a row remap pending": (with_gpu(remappedRows=[0, 0, 1, 0]), EXPECTED, "health", True),
    "a row remap failed (RMA)": (with_gpu(remappedRows=[0, 0, 0, 1]), EXPECTED, "health", False),
    "uncorrectable ECC since boot": (with_gpu(eccVolatileUncorrected=3), EXPECTED, "health", True),
    "a hardware slowdown (cooling)": (with_gpu(throttleReasons=0x8), EXPECTED, "health", False),
    "Xid 79 on a card whose row remap failed": (
        lambda f: with_gpu(remappedRows=[0, 0, 0, 1])(with_log(xid(79))(f)),
        EXPECTED,
        "health",
        False,
    ),
}


def node_check(facts: NodeFacts, expected: Expected) -> NodeCheck:
    """The report as node-check writes it and repair reads it back (JSON both ways)."""
    return parse_node_check(json.loads(json.dumps(report_json(walk(facts, expected, NODE)))), "test")


def stack() -> StackConfig:
    return validate_stack({k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()})


def h200_lab() -> StackConfig:
    return validate_stack({k.split(":", 1)[1]: v for k, v in read_stack_file("h200-lab", EXAMPLES).items()})


def healthy_cluster(report: NodeCheck | None) -> Diagnosis:
    snapshot = load_dump(str(EXAMPLES / "h200-lab.json"))
    return diagnose(snapshot, facts_of(h200_lab(), "h200-lab"), NODE, report)


@pytest.mark.parametrize(("edit", "expected", "floor", "repairs"), NODE_CASES.values(), ids=list(NODE_CASES))
def test_a_node_floor_is_repaired_exactly_when_a_power_cycle_of_the_vm_is_its_fix(
    edit: Callable[[NodeFacts], NodeFacts], expected: Expected, floor: str, repairs: bool
) -> None:
    report = node_check(edit(h200()), expected)
    decision = decide(healthy_cluster(report))

    assert report.first_broken == floor
    assert decision.repair is repairs
    if repairs:
        assert decision.reason.startswith(f"node:{floor}: ")
    else:
        assert decision.reason.startswith(f"node:{floor} is broken (")
        assert "which a power cycle of the VM does not fix: " in decision.reason


def test_the_reason_of_an_xid_79_is_the_floor_and_what_the_node_reported() -> None:
    report = node_check(with_log(xid(79))(h200()), EXPECTED)

    assert decide(healthy_cluster(report)).reason == ("node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus")


def test_an_application_xid_is_noted_not_repaired() -> None:
    report = node_check(with_log(xid(13))(h200()), EXPECTED)
    decision = decide(healthy_cluster(report))

    assert decision.repair is False
    assert decision.reason == f"no repair needed: every floor of {NODE} is ok, node-check's included"


def test_a_healthy_cluster_without_node_check_says_where_a_card_fault_would_show() -> None:
    decision = decide(healthy_cluster(None), "gpu-pool:failureDomains[dc2] has no sshAuthorizedKeys")

    assert decision.repair is False
    assert "node-check did not run (gpu-pool:failureDomains[dc2] has no sshAuthorizedKeys)" in decision.reason
    assert "--node-check FILE" in decision.reason


def test_a_report_of_another_machine_is_no_reason_to_power_cycle_this_vm() -> None:
    """doctor re-checks the report against the stack and the Node: an H200's Xid is not dc2's on prod (A1000s)."""
    report = node_check(with_log(xid(79))(h200()), EXPECTED)
    snapshot = load_dump(str(EXAMPLES / "healthy-pool.json"))
    decision = decide(diagnose(snapshot, facts_of(stack(), "prod"), NODE, report))

    assert decision.repair is False
    assert decision.reason.startswith("node:pci is broken (")
    assert "run gpu-pool node-check on rke2-worker-dc2-gpu-a itself" in decision.reason


def test_a_report_without_power_cycle_from_an_older_node_check_is_not_repaired() -> None:
    document = json.loads(json.dumps(report_json(walk(with_log(xid(79))(h200()), EXPECTED, NODE))))
    del document["fix"]["powerCycle"]
    report = parse_node_check(document, "old.json")

    assert decide(healthy_cluster(report)).repair is False


@pytest.mark.parametrize("floor", doctor.FLOOR_NAMES)
def test_no_cluster_floor_is_a_power_cycle_whatever_node_check_says(floor: str) -> None:
    """A broken floor of the cluster's (a label, the profile, a pod, the smoke test) stands below or beside the
    card: a power cycle leaves it broken, so the answer is its own fix."""
    index = doctor.FLOOR_NAMES.index(floor)
    floors = [Floor(n, True, "ok") for n in doctor.FLOOR_NAMES[:index]] + [Floor(floor, False, "what is wrong")]
    floors += [Floor(n, None, doctor.NOT_CHECKED) for n in doctor.FLOOR_NAMES[index + 1 :]]
    report = node_check(with_log(xid(79))(h200()), EXPECTED)
    diagnosis = Diagnosis(NODE, tuple(floors), floor, Fix(("trap 1: a trap",), "the command"), report)

    decision = decide(diagnosis)

    assert decision.repair is False
    assert decision.reason == (
        f"{floor} is broken (what is wrong), which a power cycle of the VM does not fix: trap 1: a trap; "
        "next: the command"
    )


def test_an_oom_killed_driver_build_is_the_drivers_own_fix() -> None:
    snapshot = load_dump(str(EXAMPLES / "broken-driver.json"))
    decision = decide(diagnose(snapshot, facts_of(stack(), "prod"), NODE))

    assert decision.repair is False
    assert decision.reason.startswith("driver is broken (nvidia-driver-daemonset-")
    assert "trap 1: The driver gets OOM-killed, exit 137; next: kubectl -n gpu-operator logs" in decision.reason


# ---------------------------------------------------------------------------------------------------- guard rails


def pool(cfg: StackConfig, **dc_states: ObservedNode | None) -> dict[str, ObservedNode | None]:
    nodes = nodes_by_domain(cfg, settled_nodes_of(cfg))
    nodes.update(dc_states)
    return nodes


def serving(cfg: StackConfig, name: str) -> ObservedNode:
    node = nodes_by_domain(cfg, settled_nodes_of(cfg))[name]
    assert node is not None
    return node


def power_cycles(*hours_ago: float, event: str = "power-cycle") -> tuple[dict[str, str], ...]:
    return tuple(
        {"at": (NOW - datetime.timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), "event": event, "reason": "x"}
        for h in hours_ago
    )


def test_a_serving_pool_lets_one_domain_be_repaired() -> None:
    cfg = stack()
    assert refusals(cfg, cfg.failure_domains[1], pool(cfg), NOW) == []


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ({"unschedulable": True}, "dc1 is out (cordoned)"),
        ({"ready": False}, "dc1 is out (not Ready)"),
        (
            {"unschedulable": True, "wave_cordoned": "dc1", "wave_turn": "2026-12-04T10:00:00Z"},
            "dc1 is out (a turn in progress since 2026-12-04T10:00:00Z)",
        ),
        (None, "dc1 is out (no Node registered)"),
    ],
    ids=["cordoned", "not Ready", "in a turn", "unregistered"],
)
def test_another_domain_out_refuses_the_repair_one_domain_at_a_time(state: dict[str, Any] | None, said: str) -> None:
    cfg = stack()
    dc1 = None if state is None else replace(serving(cfg, "dc1"), **state)

    (refusal,) = refusals(cfg, cfg.failure_domains[1], pool(cfg, dc1=dc1), NOW)

    assert refusal.startswith(f"{said}: repairing dc2 too would take 2 domains out while ")
    assert "gpu-pool:rollout.maxUnavailable is 1 (one failure domain at a time)" in refusal


def test_max_unavailable_two_lets_a_second_domain_be_repaired_but_not_a_third() -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()} | {"rollout": {"maxUnavailable": 2}}
    cfg = validate_stack(raw)
    cordoned = replace(serving(cfg, "dc1"), unschedulable=True)

    assert refusals(cfg, cfg.failure_domains[1], pool(cfg, dc1=cordoned), NOW) == []
    (refusal,) = refusals(cfg, cfg.failure_domains[1], pool(cfg, dc1=cordoned, dc3=cordoned), NOW)
    assert "would take 3 domains out while gpu-pool:rollout.maxUnavailable is 2" in refusal


def test_the_domains_own_cordon_or_turn_is_no_refusal() -> None:
    cfg = stack()
    dc2 = replace(serving(cfg, "dc2"), unschedulable=True, wave_cordoned="dc2", wave_turn="2026-12-04T10:00:00Z")

    assert refusals(cfg, cfg.failure_domains[1], pool(cfg, dc2=dc2), NOW) == []


def test_the_daily_budget_counts_the_power_cycles_of_the_last_24_hours_only() -> None:
    cfg = stack()
    dc2 = replace(serving(cfg, "dc2"), repairs=power_cycles(30, 20) + power_cycles(1, event="stopped"))

    assert power_cycles_within_a_day(dc2, NOW) == [power_cycles(20)[0]["at"]]
    assert refusals(cfg, cfg.failure_domains[1], pool(cfg, dc2=dc2), NOW) == []


def test_a_spent_daily_budget_refuses_and_says_to_look_at_the_hardware() -> None:
    cfg = stack()
    dc2 = replace(serving(cfg, "dc2"), repairs=power_cycles(20, 2))

    (refusal,) = refusals(cfg, cfg.failure_domains[1], pool(cfg, dc2=dc2), NOW)

    assert refusal == (
        "dc2's VM was power-cycled by gpu-pool repair 2 times in the last 24 hours (2026-12-03T16:00:00Z, "
        "2026-12-04T10:00:00Z) and gpu-pool:repair.maxPerDay is 2: a card that keeps faulting needs its hardware "
        "looked at (seating, riser, power, cooling of pve-dc2; the card itself), not another power cycle"
    )


def test_the_budget_is_the_stacks_repair_max_per_day() -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()} | {"repair": {"maxPerDay": 3}}
    cfg = validate_stack(raw)
    dc2 = replace(serving(cfg, "dc2"), repairs=power_cycles(20, 2))

    assert refusals(cfg, cfg.failure_domains[1], pool(cfg, dc2=dc2), NOW) == []


def guest(vmid: int, name: str, node: str = "pve-dc2") -> dict[str, Any]:
    return {"id": f"qemu/{vmid}", "type": "qemu", "vmid": vmid, "name": name, "node": node, "status": "running"}


def test_the_stacks_vm_running_under_the_nodes_name_on_its_host_passes() -> None:
    domain = stack().failure_domains[1]
    assert vm_problem(domain, [guest(4101, "rke2-worker-dc1-gpu-a", "pve-dc1"), guest(4201, NODE)]) is None


@pytest.mark.parametrize(
    ("guests", "said"),
    [
        ([guest(4250, NODE)], f"the stack's VM 4201 on pve-dc2 does not exist in Proxmox (VMs named {NODE}: VM 4250"),
        (
            [guest(4201, "build-runner"), guest(4250, NODE)],
            f"Proxmox runs VM 4201 as build-runner, not {NODE} (VM 4250",
        ),
        ([guest(4201, NODE, "pve-dc3")], f"Proxmox runs VM 4201 ({NODE}) on pve-dc3, the stack says pve-dc2"),
        ([guest(4201, NODE), guest(4299, NODE)], f"Proxmox has 2 VMs named {NODE} (VM 4201 on pve-dc2, VM 4299"),
    ],
    ids=["no such id", "the id is another guest", "migrated", "two of that name"],
)
def test_a_vm_that_is_not_the_stacks_is_refused(guests: list[dict[str, Any]], said: str) -> None:
    problem = vm_problem(stack().failure_domains[1], guests)

    assert problem is not None and problem.startswith(said)


def test_the_docs_list_exactly_the_xids_a_repair_power_cycles_for() -> None:
    import re

    from knowledge.xid import XIDS

    doc = (ROOT / "docs" / "day2.md").read_text(encoding="utf-8")
    (row,) = [line for line in doc.splitlines() if line.startswith("| `node:health`: an Xid whose catalogue action")]
    listed = {int(code) for code in re.search(r"\(([\d, ]+)\)", row).group(1).split(", ")}  # type: ignore[union-attr]

    assert listed == {code for code, xid in XIDS.items() if xid.power_cycle_fixes}


@pytest.mark.parametrize(
    ("state", "refused"), [("gating", True), ("draining", True), ("stopped", False), ("done", False)]
)
def test_a_repair_of_a_node_a_wave_is_turning_is_refused(state: str, refused: bool) -> None:
    """FIELD-REVIEW-5 H2, a repair during a wave: both wrote the same turn marks with no exclusion. A stopped
    wave's node is what its wave-stopped note sends to `gpu-pool repair`."""
    domain = stack().failure_domains[1]
    node = ObservedNode(turn_state=state, turn_holder="up:prod since 2026-12-05T10:00:00Z")
    observed = {d.name: ObservedNode() for d in stack().failure_domains} | {domain.name: node}
    problems = refusals(stack(), domain, observed, datetime.datetime(2026, 12, 5, 12, tzinfo=datetime.UTC))

    said = f"{domain.hostname} is held by up:prod since 2026-12-05T10:00:00Z (gpu-pool.dev/turn-state {state})"
    assert any(said in p for p in problems) is refused
