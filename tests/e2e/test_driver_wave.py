"""A driver change by `pulumi up` rolls through the GPU Operator's own upgrade controller one failure domain at a time,
in the wave's order, under the upgrade policy the program passes (FIELD-REVIEW-4 WRONG-3).

On the `deployed` stack (tests/e2e/engine_deployed.py): the operator's controller (v26.7.0, built from source) runs
the ClusterPolicy the release installed, its `driver.upgradePolicy` the program's (`autoUpgrade: true`,
`maxUnavailable: "0"`, stored as the integer 0). One `up` moves the driver from the pinned 595.91.07 to 580.173.02
(v26.7.0 lists both) with `rollout.order: [dc3, dc1, dc2]`, the review's scenario; the next puts prod back, in the
failureDomains order. During each, a watcher samples every GPU node: its cordon, the operator's upgrade state and
the driver of its Ready driver pod (tests/e2e/upgrade_watch.py). The release is updated first; the operator marks
every node upgrade-required and, with no upgrade slot of its own, moves only the node the wave's drain cordoned;
KWOK runs the driver pod kube-controller-manager's DaemonSet controller recreates; the wave's gate waits for it on
the new driver; then the next domain.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from offline.runner import PROJECT
from tests.e2e.engine_deployed import Deployed, rewrite_config, up_settled
from tests.e2e.upgrade_watch import DONE, Sample, Watch, domain_out, out_of_service, sampling

OTHER_DRIVER = "580.173.02"
REVIEW_ORDER = ["dc3", "dc1", "dc2"]


@dataclass(frozen=True)
class Rolled:
    """One `up` that changed the driver, as the watcher saw it."""

    driver: str
    order: list[str]
    moments: list[dict[str, Sample]]
    errors: list[str]
    states: dict[str, set[str]]  # every upgrade state each domain's node took (upgrade_watch.Watch.states_seen)


def watched_up(deployed: Deployed, config: dict[str, Any], driver: str, order: list[str]) -> Rolled:
    namespace = str(config[f"{PROJECT}:gpuOperator"].get("namespace", "gpu-operator"))
    hosts = {d["name"]: d["hostname"] for d in config[f"{PROJECT}:failureDomains"]}
    watch = Watch(deployed.plane.kubectl, namespace, hosts)
    rewrite_config(deployed.stack, config)
    with sampling(watch):
        up_settled(deployed)
    return Rolled(driver, order, watch.moments(), watch.errors, {d: watch.states_seen(d) for d in hosts})


@pytest.fixture(scope="module")
def rolled(deployed: Deployed) -> Iterator[list[Rolled]]:
    pinned = deployed.base[f"{PROJECT}:gpuOperator"]["driverVersion"]
    domains = [d["name"] for d in deployed.base[f"{PROJECT}:failureDomains"]]

    def bumped(config: dict[str, Any]) -> None:
        config[f"{PROJECT}:gpuOperator"]["driverVersion"] = OTHER_DRIVER
        config[f"{PROJECT}:rollout"] = {**config.get(f"{PROJECT}:rollout", {}), "order": REVIEW_ORDER}

    runs: list[Rolled] = []
    try:
        runs.append(watched_up(deployed, deployed.config_with(bumped), OTHER_DRIVER, REVIEW_ORDER))
    finally:
        # prod as deployed, for the tests after this module: a wave back to the pinned driver.
        runs.append(watched_up(deployed, deployed.base, pinned, domains))
    yield runs


def first_out(moments: list[dict[str, Sample]]) -> list[str]:
    """The domains in the order each first went out of service."""
    seen: list[str] = []
    for moment in moments:
        seen += [d for d, s in sorted(moment.items()) if domain_out(s) and d not in seen]
    return seen


def test_the_watcher_saw_every_moment_of_both_driver_waves(rolled: list[Rolled]) -> None:
    for run in rolled:
        assert not run.errors, run.errors[:3]
        assert len(run.moments) > 10, f"{len(run.moments)} samples of the wave to {run.driver}"


def test_a_driver_wave_never_has_two_failure_domains_out_at_once(rolled: list[Rolled]) -> None:
    for run in rolled:
        out = [sorted(d for d, s in moment.items() if domain_out(s)) for moment in run.moments]
        worst = max(out, key=len)
        assert len(worst) <= 1, f"the wave to {run.driver} had {worst} out at once"


def test_the_domains_go_out_in_the_waves_order_and_each_is_upgraded_by_the_operators_state_machine(
    rolled: list[Rolled],
) -> None:
    for run in rolled:
        assert first_out(run.moments) == run.order, run.driver
        for domain in run.order:
            states = run.states[domain]
            # The upgrade controller's own states between required and done (k8s-operator-libs pkg/upgrade/consts.go):
            # the driver was swapped by the operator, not by a step of the program.
            assert states - {"", DONE, "upgrade-required"}, (run.driver, domain, states)
            assert any(out_of_service(m[domain]) for m in run.moments), (run.driver, domain)


def test_after_each_driver_wave_every_node_serves_on_the_new_driver_its_upgrade_done(rolled: list[Rolled]) -> None:
    for run in rolled:
        last = run.moments[-1]
        assert {d: (s.driver, s.state, s.unschedulable) for d, s in last.items()} == {
            d: (run.driver, DONE, False) for d in last
        }


def test_a_node_the_operator_upgraded_serves_again_only_after_its_turns_last_step_recorded_the_new_driver(
    rolled: list[Rolled],
) -> None:
    """The wave's drain marks the node with the operator's initial-state annotation, so the upgrade controller leaves
    it cordoned when the driver is swapped; the turn's last step (after the gate and smoke test) uncordons it, in
    the patch that records the driver (rollout.rollout_done_command). Without the mark the operator uncordoned it
    a few seconds before the gate."""
    for run in rolled:
        for domain in run.order:
            seen = [m[domain] for m in run.moments]
            first = next(i for i, s in enumerate(seen) if domain_out(s))
            early = [
                (round(s.at - seen[first].at, 1), s.state, s.driver)
                for s in seen[first:]
                if not s.unschedulable and s.rolled != run.driver
            ]
            assert not early, f"{domain} served again before its turn ended, on the way to {run.driver}: {early[:3]}"
