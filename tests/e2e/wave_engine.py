"""A day-2 wave run as the Pulumi engine runs a plan: each resource once everything it depends on succeeded, and
never one that depends on a failed resource. The wave's own kubectl steps run for real; what needs a VM (the RKE2
installer over SSH) is played by the test, and the steps this `up` leaves unchanged are done already."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from tests.e2e.steps import StepRunner

Outcome = Literal["ran", "failed", "not started", "unchanged"]


@dataclass
class WaveRun:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    output: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)


def run_wave(
    runner: StepRunner,
    runs: Callable[[str], bool],
    played: Mapping[str, Callable[[], bool]],
    **override: str,
) -> WaveRun:
    """`runs(name)`: the local commands this `up` creates (from `make diff`); `played`: the remote ones, each
    played by a callable that says whether it succeeded."""
    resources = {r["urn"]: r for r in runner.stack.plan["resources"]}
    result = WaveRun()
    state: dict[str, Outcome] = {}
    remaining = dict(resources)
    while remaining:
        ready = [
            urn
            for urn, r in remaining.items()
            if all(d not in resources or d in state for d in r.get("dependsOn") or [])
            and (r.get("parent") not in resources or r["parent"] in state)
        ]
        assert ready, "a dependency cycle in the plan"
        for urn in sorted(ready, key=lambda u: resources[u]["name"]):
            r = remaining.pop(urn)
            blockers = [*(r.get("dependsOn") or []), r.get("parent")]
            if any(state.get(d) in ("failed", "not started") for d in blockers if d in resources):
                state[urn] = "not started"
            elif r["name"] in played:
                state[urn] = "ran" if played[r["name"]]() else "failed"
                result.order.append(r["name"])
            elif r["type"] == "command:local:Command" and runs(r["name"]):
                done = runner.command(r["name"], **override)
                result.output[r["name"]] = done
                result.order.append(r["name"])
                state[urn] = "ran" if done.returncode == 0 else "failed"
            else:
                state[urn] = "unchanged"
            result.outcomes[r["name"]] = state[urn]
    return result
