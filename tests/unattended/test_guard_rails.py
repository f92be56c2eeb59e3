"""The unattended repair's guard rails as data: each refusal a typed reason, all of them reported together, and a
pool-wide breaker that opens after `breakerFailures` repairs that did not fix within `breakerWindow` and is closed
only by a person. A property test drives random pools through the verdict and checks it against the rules."""

from __future__ import annotations

import datetime
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.gpu_failure_domain.observed import ObservedNode
from components.stack_check import validate_stack
from day2.repair.decide import Decision
from day2.repair.unattended import (
    Breaker,
    Failure,
    Pool,
    Reason,
    UnattendedFacts,
    breaker_data,
    breaker_of,
    record_failure,
    reset,
    verdict,
)
from node.vocabulary import WATCHER_HOLDER_PREFIX
from offline.runner import read_stack_file

NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)
XID = Decision(True, "node:health: Xid 79 on 0000:01:00.0 (fallen off the bus)")


def stack(**unattended: Any) -> UnattendedFacts:
    """The prod stack's facts as the watcher reads them: computed from the validated config, through JSON."""
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    repair = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, **unattended}}
    return UnattendedFacts.from_json(
        json.loads(json.dumps(UnattendedFacts.of(validate_stack(raw | {"repair": repair})).as_json()))
    )


CFG = stack()
SERVING = ObservedNode(rollout={"driver": "x"})


def pool(**nodes: ObservedNode | None) -> Pool:
    return Pool({d.name: nodes.get(d.name, SERVING) for d in CFG.domains})


def at(hours_ago: float) -> str:
    return (NOW - datetime.timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_faulted_card_in_a_serving_pool_is_repaired() -> None:
    assert verdict(CFG, "dc1", XID, pool(dc1=ObservedNode(unschedulable=True)), NOW).repair


def test_another_domain_out_refuses_even_within_max_unavailable() -> None:
    result = verdict(CFG, "dc1", XID, pool(dc2=ObservedNode(ready=False)), NOW)

    assert result.reasons == (Reason.ANOTHER_DOMAIN_OUT,) and "dc2" in result.refusals[0].message


def test_an_unregistered_node_of_another_domain_counts_as_out() -> None:
    assert verdict(CFG, "dc1", XID, pool(dc3=None), NOW).reasons == (Reason.ANOTHER_DOMAIN_OUT,)


def test_a_node_held_by_a_wave_or_a_persons_repair_refuses_but_the_watchers_own_hold_does_not() -> None:
    wave = ObservedNode(turn_state="stopped", turn_holder="up:prod@2026-12-05T01:00:00Z")
    person = ObservedNode(turn_state="repairing", turn_holder="repair:ana@laptop")
    own = ObservedNode(turn_state="repairing", turn_holder=f"{WATCHER_HOLDER_PREFIX}gpu-pool-repair")

    assert Reason.NODE_HELD in verdict(CFG, "dc1", XID, pool(dc1=wave), NOW).reasons
    assert Reason.NODE_HELD in verdict(CFG, "dc1", XID, pool(dc1=person), NOW).reasons
    assert Reason.NODE_HELD not in verdict(CFG, "dc1", XID, pool(dc1=own), NOW).reasons


def test_the_daily_budget_counts_per_domain() -> None:
    cycled = ObservedNode(repairs=({"at": at(1), "event": "power-cycle"}, {"at": at(5), "event": "power-cycle"}))
    old = ObservedNode(repairs=({"at": at(30), "event": "power-cycle"}, {"at": at(25), "event": "power-cycle"}))

    assert verdict(CFG, "dc1", XID, pool(dc1=cycled), NOW).reasons == (Reason.DAILY_BUDGET_SPENT,)
    assert verdict(CFG, "dc1", XID, pool(dc1=old), NOW).repair


def test_a_decision_outside_the_listed_ones_is_left_to_a_person() -> None:
    only_pci = stack(decisions=["node:pci"])

    assert verdict(only_pci, "dc1", XID, pool(), NOW).reasons == (Reason.DECISION_NOT_UNATTENDED,)


def test_no_repair_and_a_finding_a_power_cycle_does_not_fix_are_typed_apart() -> None:
    none = Decision(False, "no repair needed: every floor of x is ok, node-check's included")
    other = Decision(False, "node:driver is broken (595 != 580), which a power cycle of the VM does not fix: ...")

    assert verdict(CFG, "dc1", none, pool(), NOW).reasons == (Reason.NO_REPAIR_NEEDED,)
    assert verdict(CFG, "dc1", other, pool(), NOW).reasons == (Reason.NOT_A_POWER_CYCLE_FIX,)


def test_an_ineligible_domain_and_an_open_breaker_refuse_and_every_reason_is_reported_at_once() -> None:
    broken = Pool({**pool(dc2=ObservedNode(ready=False)).nodes}, Breaker(open=True), {"dc1": "raw passthrough"})

    reasons = set(verdict(CFG, "dc1", XID, broken, NOW).reasons)

    assert reasons == {Reason.NOT_ELIGIBLE, Reason.BREAKER_OPEN, Reason.ANOTHER_DOMAIN_OUT}


def test_the_breaker_opens_on_the_second_failure_within_the_window_and_not_when_they_are_further_apart() -> None:
    first = record_failure(Breaker(), CFG, Failure(at(30), "a", "node-check"), NOW)
    assert not first.open and first.failures == ()  # outside 24h: forgotten
    one = record_failure(Breaker(), CFG, Failure(at(3), "a", "node-check"), NOW)
    two = record_failure(one, CFG, Failure(at(1), "b", "smoke test"), NOW)

    assert not one.open and two.open and two.opened_at == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_open_breaker_stays_open_after_its_window_until_a_person_resets_it() -> None:
    opened = Breaker(open=True, failures=(Failure(at(100), "a", "x"),), opened_at=at(100))
    later = record_failure(opened, CFG, Failure(at(0), "c", "y"), NOW)

    assert later.open and later.opened_at == opened.opened_at
    closed = reset(later, "ana@laptop", NOW)
    assert not closed.open and (closed.reset_by, closed.failures) == ("ana@laptop", ())


def test_the_breaker_survives_its_configmap_and_an_unreadable_one_reads_as_open() -> None:
    breaker = record_failure(Breaker(reset_by="ana@laptop"), CFG, Failure(at(1), "a", "smoke"), NOW)

    assert breaker_of(breaker_data(breaker)) == breaker
    assert breaker_of({"state": "closed", "failures": "not json"}).open
    assert breaker_of({"state": "half-open"}).open
    assert not breaker_of(None).open


node_states = st.builds(
    ObservedNode,
    unschedulable=st.booleans(),
    ready=st.booleans(),
    turn_state=st.sampled_from(["", "done", "draining", "stopped", "repairing"]),
    turn_holder=st.sampled_from(["up:prod", "repair:ana@laptop", f"{WATCHER_HOLDER_PREFIX}ns"]),
    repairs=st.lists(st.builds(lambda h: {"at": at(h), "event": "power-cycle"}, st.floats(0.1, 48)), max_size=3).map(
        tuple
    ),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    nodes=st.fixed_dictionaries({d.name: st.one_of(st.none(), node_states) for d in CFG.domains}),
    breaker_open=st.booleans(),
)
def test_the_watcher_repairs_exactly_when_no_guard_rail_holds(
    nodes: dict[str, ObservedNode | None], breaker_open: bool
) -> None:
    result = verdict(CFG, "dc1", XID, Pool(nodes, Breaker(open=breaker_open)), NOW)

    others_out = any(n is None or n.out for name, n in nodes.items() if name != "dc1")
    held = any(n is not None and n.held and not n.turn_holder.startswith(WATCHER_HOLDER_PREFIX) for n in nodes.values())
    me = nodes["dc1"]
    spent = me is not None and sum(1 for r in me.repairs if r["at"] > at(24)) >= CFG.max_per_day
    assert result.repair == (not others_out and not held and not spent and not breaker_open)
    assert (Reason.ANOTHER_DOMAIN_OUT in result.reasons) == others_out
    assert (Reason.NODE_HELD in result.reasons) == held
    assert (Reason.BREAKER_OPEN in result.reasons) == breaker_open
