"""The day-2 wave as the current preview's resource graph has it: which domain goes first, what each one's
turn waits for, and the steps of its turn, for `make diff`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.gpu_failure_domain.rollout import CHANGE_WORDS
from offline.recording import Recording

# A turn's steps in the order they run (those the domain has), with what each does, in make diff's words.
STEPS: tuple[tuple[str, str], ...] = (
    ("rke2-login", "prove the SSH login"),
    ("wave-drain", "cordon and drain"),
    ("rke2-upgrade", "install the pinned RKE2 and restart rke2-agent"),
    ("device-plugin-restart", "restart the device plugin"),
    ("power-cycle", "power-cycle the VM if Proxmox has a change pending"),
    ("kernel-install", "install the kernel and reboot"),
    ("kernel-driver-rebuild", "rebuild the driver"),
    ("gpu-ready", "wait for its GPU slots on the pinned driver"),
    ("cuda-smoke-test", "CUDA smoke test"),
    ("wave-gate", "gate: Ready at the pinned kubelet, slots on the pinned driver"),
    ("rollout", "uncordon and record the rollout"),
)


@dataclass
class DomainTurn:
    changes: list[str]
    waits_for: list[str]
    steps: list[str]


@dataclass
class Wave:
    batches: list[list[str]]
    domains: dict[str, DomainTurn] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "domains": {
                name: {"changes": turn.changes, "waitsFor": turn.waits_for, "steps": turn.steps}
                for name, turn in self.domains.items()
            },
        }


def wave_of(recording: Recording, running: set[str] | None = None) -> Wave | None:
    """`running`: the names of the resources this `up` creates, replaces or updates (a step that stays the same
    does nothing in this wave and is not listed)."""
    planned = recording.stack_outputs.get("wave")
    if not planned:
        return None
    by_urn = {r.urn: r for r in recording.registrations}
    names = {r.name for r in recording.registrations}
    wave = Wave(batches=[list(batch) for batch in planned["order"]])
    for batch in wave.batches:
        for domain in batch:
            drain = recording.named(f"{domain}-wave-drain")
            # From the graph, not from the plan: the other domains' last steps this turn's drain depends on.
            waits = sorted(
                by_urn[urn].name.removesuffix("-rollout")
                for urn in drain.dependencies
                if urn in by_urn and by_urn[urn].name.endswith("-rollout")
            )
            wave.domains[domain] = DomainTurn(
                changes=list(planned["changes"].get(domain, [])),
                waits_for=waits,
                steps=[
                    step
                    for step, _ in STEPS
                    if f"{domain}-{step}" in names and (running is None or f"{domain}-{step}" in running)
                ],
            )
    return wave


def wave_lines(wave: Wave) -> list[str]:
    size = max(len(batch) for batch in wave.batches)
    lines = [
        f"Wave ({len(wave.domains)} domain{'s' if len(wave.domains) != 1 else ''}, {size} at a time; "
        "gpu-pool:rollout.order sets the order):"
    ]
    words = dict(STEPS)
    for number, batch in enumerate(wave.batches, 1):
        for domain in batch:
            turn = wave.domains[domain]
            after = f"after {', '.join(turn.waits_for)} is uncordoned" if turn.waits_for else "first"
            what = ", ".join(CHANGE_WORDS.get(change, change) for change in turn.changes)
            lines.append(f"  {number}. {domain} ({after}): {what}")
            lines.append(f"     steps: {'; '.join(words[step] for step in turn.steps)}")
    lines.append(
        "  A failed step stops the wave there: that domain stays cordoned, the ones after it are not touched; "
        "`pulumi up` again resumes at it."
    )
    return lines
