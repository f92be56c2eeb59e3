"""What each floor check returns, and what it reads about one node (derived once, shared by the floors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from day2 import objects as o
from day2.doctor import sharing
from day2.doctor.traps import other_trap, trap
from day2.pool import Domain, PoolFacts
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL, GPU_COUNT_LABEL


@dataclass(frozen=True)
class Fix:
    # `trap N: <title>` of every trap of the docs' table this failure can be; empty when it is none of them.
    traps: tuple[str, ...]
    # The next command to run.
    command: str

    @classmethod
    def of(cls, command: str, *traps: int | str) -> Fix:
        """Traps by number (the article's thirteen) or by title (day2.doctor.traps.OTHER_TRAPS)."""
        return cls(tuple(trap(n) if isinstance(n, int) else other_trap(n) for n in traps), command)


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str
    fix: Fix | None = None


@dataclass(frozen=True)
class NodeContext:
    snapshot: o.Snapshot
    facts: PoolFacts
    name: str
    node: Mapping[str, Any] | None
    domain: Domain | None
    # The profile the node's nvidia.com/device-plugin.config label names, if any.
    profile: str | None
    # The time-slicing ConfigMap, and the plugin's reading of the node's profile there (None: not found/refused).
    configmap: Mapping[str, Any] | None
    reading: sharing.ProfileReading | None

    @classmethod
    def of(cls, snapshot: o.Snapshot, facts: PoolFacts, name: str) -> NodeContext:
        node = next((n for n in snapshot.nodes if o.name(n) == name), None)
        profile = o.labels(node).get(DEVICE_PLUGIN_CONFIG_LABEL) if node is not None else None
        configmap = sharing.find_configmap(snapshot, facts.operator_namespace, facts.time_slicing_configmap)
        document = sharing.profiles(configmap).get(profile or "") if configmap is not None else None
        reading = sharing.read_profile(document) if document is not None else None
        return cls(snapshot, facts, name, node, facts.domain_of(name), profile or None, configmap, reading)

    @property
    def configmap_slots(self) -> int | None:
        """The slots per card the node's profile gives in the ConfigMap (None: not found or refused)."""
        return self.reading.slots if self.reading is not None else None

    @property
    def expected_slots(self) -> int | None:
        """What the node should advertise: the stack's slots (profile x its cards) when there is a stack, else the
        ConfigMap's slots per card times the cards GPU Feature Discovery counted (one when it has not labelled)."""
        if self.domain is not None:
            return self.domain.slots
        if self.configmap_slots is None:
            return None
        count = o.labels(self.node or {}).get(GPU_COUNT_LABEL, "1")
        return self.configmap_slots * (int(count) if count.isdigit() and int(count) > 0 else 1)

    @property
    def ns(self) -> str:
        return self.facts.operator_namespace

    def pulumi_up(self) -> str:
        return f"pulumi up --stack {self.facts.stack}" if self.facts.stack else "pulumi up"
