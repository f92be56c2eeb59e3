"""The day-2 wave as the current preview has it, for `make diff`: the program's own plan (its `wave` output:
components/gpu_failure_domain/plan.py `wave_export`) for the turns, step names and descriptions and the capacity
timeline, and the resource graph for what each turn really waits for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.gpu_failure_domain.plan import CHANGE_WORDS, StepName
from offline.recording import Recording


@dataclass
class DomainTurn:
    turn: str
    why: str
    changes: list[str]
    waits_for: list[str]
    # (name, description) of each step this `up` runs, in plan order.
    steps: list[tuple[str, str]]


@dataclass
class Wave:
    batches: list[list[str]]
    domains: dict[str, DomainTurn] = field(default_factory=dict)
    capacity: list[dict[str, Any]] = field(default_factory=list)
    dangers: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "domains": {
                name: {
                    "turn": turn.turn,
                    "why": turn.why,
                    "changes": turn.changes,
                    "waitsFor": turn.waits_for,
                    "steps": [name for name, _ in turn.steps],
                }
                for name, turn in self.domains.items()
            },
            "capacity": self.capacity,
        }


def wave_of(recording: Recording, running: set[str] | None = None) -> Wave | None:
    """`running`: the names of the resources this `up` creates, replaces or updates (a step that stays the same
    does nothing in this wave and is not listed)."""
    planned = recording.stack_outputs.get("wave")
    if not planned:
        return None
    by_urn = {r.urn: r for r in recording.registrations}
    wave = Wave(
        batches=[list(batch) for batch in planned["order"]],
        capacity=list(planned.get("capacity") or []),
        dangers=list(planned.get("dangers") or []),
    )
    last = f"-{StepName.ROLLOUT}"
    for domain, turn in (planned.get("domains") or {}).items():
        names = {f"{domain}-{step['name']}" for step in turn["steps"]}
        # From the graph, not from the plan: the other domains' last steps this turn's first steps depend on.
        waits = sorted(
            {
                by_urn[urn].name.removesuffix(last)
                for r in recording.registrations
                if r.name in names
                for urn in r.dependencies
                if urn in by_urn and by_urn[urn].name.endswith(last) and not by_urn[urn].name.startswith(f"{domain}-")
            }
        )
        wave.domains[domain] = DomainTurn(
            turn=turn["turn"],
            why=turn["why"],
            changes=list((planned.get("changes") or {}).get(domain, [])),
            waits_for=waits,
            steps=[
                (step["name"], step["description"])
                for step in turn["steps"]
                if running is None or f"{domain}-{step['name']}" in running
            ],
        )
    return wave


def wave_lines(wave: Wave) -> list[str]:
    size = max((len(batch) for batch in wave.batches), default=0)
    lines = [
        f"Wave ({len(wave.domains)} domain{'s' if len(wave.domains) != 1 else ''}"
        + (f", {size} at a time" if size else "")
        + "; gpu-pool:rollout.order sets the order):"
    ]
    ordered = [name for batch in wave.batches for name in batch]
    ordered += [name for name in wave.domains if name not in ordered]
    for number, domain in enumerate(ordered, 1):
        turn = wave.domains[domain]
        after = f"after {', '.join(turn.waits_for)} is uncordoned" if turn.waits_for else "first"
        if domain not in {name for batch in wave.batches for name in batch}:
            after = "no drain"
        what = ", ".join(CHANGE_WORDS.get(change, change) for change in turn.changes) or "finish its turn"
        lines.append(f"  {number}. {domain} ({after}, {turn.turn}): {what}")
        lines.append(f"     {turn.why}")
        lines.append(f"     steps: {'; '.join(description for _, description in turn.steps)}")
    if wave.capacity:
        lines.append("  Capacity (schedulable GPU slots as the wave goes):")
        for point in wave.capacity:
            out = ", ".join(point["out"]) or "none"
            lines.append(f"    {point['slots']:>4} slots, out: {out}")
    lines.append(
        "  A failed step stops the wave there: that domain stays cordoned, the ones after it are not touched; "
        "`pulumi up` again resumes that domain's turn (its gate runs again before it is uncordoned)."
    )
    return lines
