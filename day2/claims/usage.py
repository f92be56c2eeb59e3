"""`gpu-pool claims --usage`: GPU-hours held per namespace and per Kubeflow profile owner, from the usage
recording rules (components/gpu_platform/usage_rules.py) in Prometheus.

GPU-hours held = sum_over_time(namespace:gpu_pool_gpus_held:sum[RANGE]) x the rule group's interval / 3600: each
recorded sample stands for one interval, and a missing sample (Prometheus down, the rule not loaded yet) counts as
zero, so the answer says from when data exists. Held, not used: on a time-sliced card every pod sees the whole
card's utilisation (dcgm-exporter #642), so a pod holding 1 of 4 slots is charged a quarter of a GPU whether it
computes or not. The idle share is the part of those hours spent on nodes whose cards were all below the idle
threshold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from components.gpu_platform.usage_rules import (
    GPUS_HELD,
    GPUS_HELD_IDLE,
    SLOTS_HELD,
    USAGE_INTERVAL_SECONDS,
    data_since_query,
    gpu_hours_query,
)
from day2.claims.prometheus import instant_query
from day2.objects import Snapshot, metadata
from day2.text_table import write_table
from knowledge.kubeflow import PROFILE_OWNER_ANNOTATION

TIMEOUT_SECONDS = 30
# A Prometheus duration: one or more <number><unit>, units y w d h m s ms (e.g. 7d, 36h, 1h30m).
_DURATION_PART = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def prometheus_duration(text: str) -> str:
    """`text` if it is a Prometheus duration above zero (7d, 36h, 1h30m); raises ValueError naming the form."""
    if not text or _DURATION_PART.sub("", text) or duration_seconds(text) <= 0:
        raise ValueError(f"'{text}' is not a Prometheus duration such as 7d, 36h, 90m or 1h30m")
    return text


def duration_seconds(text: str) -> float:
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


@dataclass(frozen=True)
class NamespaceUsage:
    namespace: str
    owner: str | None
    gpu_hours: float
    slot_hours: float
    idle_gpu_hours: float

    @property
    def idle_share(self) -> float | None:
        return self.idle_gpu_hours / self.gpu_hours if self.gpu_hours > 0 else None


@dataclass(frozen=True)
class OwnerUsage:
    owner: str
    namespaces: tuple[str, ...]
    gpu_hours: float
    slot_hours: float


@dataclass(frozen=True)
class Usage:
    window: str
    start: datetime
    end: datetime
    data_from: datetime | None
    namespaces: tuple[NamespaceUsage, ...]
    owners: tuple[OwnerUsage, ...]
    owners_known: bool


def profile_owners(snapshot: Snapshot) -> dict[str, str] | None:
    """namespace -> owner, from the annotation Kubeflow's profile controller puts on a profile's namespace; None
    when the snapshot holds no Namespaces (a dump written without them)."""
    if not snapshot.namespaces:
        return None
    owners: dict[str, str] = {}
    for namespace in snapshot.namespaces:
        annotations = metadata(namespace).get("annotations") or {}
        owner = annotations.get(PROFILE_OWNER_ANNOTATION) if isinstance(annotations, Mapping) else None
        if isinstance(owner, str) and owner:
            owners[str(metadata(namespace).get("name", ""))] = owner
    return owners


def _vector(body: Any) -> list[dict[str, Any]]:
    if body.get("status") != "success" or body["data"]["resultType"] != "vector":
        raise ValueError(f"unexpected answer: {str(body)[:200]}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _query(url: str, promql: str, at: datetime, headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    return instant_query(url, promql, at, _vector, timeout=TIMEOUT_SECONDS, headers=headers)


def _by_namespace(result: list[dict[str, Any]]) -> dict[str, float]:
    return {str(s["metric"].get("namespace", "")): float(s["value"][1]) for s in result}


def read_usage(
    url: str,
    window: str,
    end: datetime,
    owners: Mapping[str, str] | None,
    headers: Mapping[str, str] | None = None,
) -> Usage:
    """GPU-hours, slot-hours and idle hours per namespace over `window` before `end`, grouped by profile owner.
    `headers`: the login's Authorization (config/prometheus_access.py), for a Prometheus that asks for one."""
    held = _by_namespace(_query(url, gpu_hours_query(GPUS_HELD, window), end, headers))
    slots = _by_namespace(_query(url, gpu_hours_query(SLOTS_HELD, window), end, headers))
    idle = _by_namespace(_query(url, gpu_hours_query(GPUS_HELD_IDLE, window), end, headers))
    since = _query(url, data_since_query(window), end, headers)
    data_from = datetime.fromtimestamp(float(since[0]["value"][1]), UTC) if since else None
    names = sorted(set(held) | set(slots))
    rows = tuple(
        NamespaceUsage(
            namespace=name,
            owner=(owners or {}).get(name),
            gpu_hours=held.get(name, 0.0),
            slot_hours=slots.get(name, 0.0),
            idle_gpu_hours=idle.get(name, 0.0),
        )
        for name in sorted(names, key=lambda n: (-held.get(n, 0.0), n))
    )
    by_owner: dict[str, list[NamespaceUsage]] = {}
    for row in rows:
        if row.owner:
            by_owner.setdefault(row.owner, []).append(row)
    owner_rows = tuple(
        OwnerUsage(
            owner=owner,
            namespaces=tuple(sorted(r.namespace for r in members)),
            gpu_hours=sum(r.gpu_hours for r in members),
            slot_hours=sum(r.slot_hours for r in members),
        )
        for owner, members in sorted(by_owner.items(), key=lambda item: (-sum(r.gpu_hours for r in item[1]), item[0]))
    )
    start = end - timedelta(seconds=duration_seconds(window))
    return Usage(window, start, end, data_from, rows, owner_rows, owners is not None)


def _time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "window": usage.window,
        "from": _time(usage.start),
        "to": _time(usage.end),
        "dataFrom": _time(usage.data_from) if usage.data_from else None,
        "intervalSeconds": USAGE_INTERVAL_SECONDS,
        "namespaces": [
            {
                "namespace": row.namespace,
                "owner": row.owner,
                "gpuHours": round(row.gpu_hours, 4),
                "slotHours": round(row.slot_hours, 4),
                "idleGpuHours": round(row.idle_gpu_hours, 4),
                "idleShare": None if row.idle_share is None else round(row.idle_share, 4),
            }
            for row in usage.namespaces
        ],
        "owners": None
        if not usage.owners_known
        else [
            {
                "owner": row.owner,
                "namespaces": list(row.namespaces),
                "gpuHours": round(row.gpu_hours, 4),
                "slotHours": round(row.slot_hours, 4),
            }
            for row in usage.owners
        ],
    }


def print_usage(usage: Usage, out: TextIO) -> None:
    """The two tables: per namespace, then per Kubeflow profile owner."""
    since = (
        f"data from {_time(usage.data_from)}" if usage.data_from else "no usage data in this range (rule not loaded?)"
    )
    out.write(
        f"GPU-hours held, {usage.window} to {_time(usage.end)} ({since}; a missing sample counts as zero). "
        "Held, not used: 1 of a card's 4 time-slices is 0.25 GPU.\n\n"
    )
    write_table(
        ("NAMESPACE", "PROFILE OWNER", "GPU-HOURS", "SLOT-HOURS", "IDLE SHARE"),
        [
            (
                row.namespace,
                row.owner or "-",
                f"{row.gpu_hours:.2f}",
                f"{row.slot_hours:.2f}",
                "-" if row.idle_share is None else f"{row.idle_share:.0%}",
            )
            for row in usage.namespaces
        ],
        out,
    )
    out.write("\n")
    if not usage.owners_known:
        out.write("Profile owners: unknown (the dump has no Namespaces; add `namespaces` to the kubectl get).\n")
        return
    write_table(
        ("PROFILE OWNER", "NAMESPACES", "GPU-HOURS", "SLOT-HOURS"),
        [(r.owner, ",".join(r.namespaces), f"{r.gpu_hours:.2f}", f"{r.slot_hours:.2f}") for r in usage.owners],
        out,
    )
