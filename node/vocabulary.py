"""The Node's vocabulary, declared once: what gpu-pool writes on a GPU worker's Node and what it reads of it.

The annotations are the contract between a turn and the next preview (components/gpu_failure_domain/observed.py
reads them into an ObservedNode):
- ROLLOUT_ANNOTATION: what the worker was last rolled to and gated on (written by the turn's last step).
- WAVE_CORDON_ANNOTATION: the turn cordoned this node (only set when it found it schedulable), so only the turn's
  end uncordons it; a node someone else cordoned stays cordoned.
- WAVE_TURN_ANNOTATION: when a turn's drain started; present until that turn's end: a turn in progress.
- REPAIRS_ANNOTATION: what a repair did on the node, oldest first, the last week of it: each power cycle of its VM
  (when, why, which VM: what the daily budget counts), each repair that passed its checks, each one that stopped.
- WAVE_STOPPED_ANNOTATION: why the turn stopped (its drain or its gate failed), so a cordoned node says why.
- WAVE_SKIP_ANNOTATION: the turn set the GPU Operator's skip label for its drain (an admin's skip label has no such
  mark and is never removed by gpu-pool).
- DRIVER_REVISION_ANNOTATION: the ControllerRevision the node's driver pod was on when the turn started: a turn that
  rolls a driver change passes its gate only on a driver pod of a newer revision (node/gate.py).
- TURN_STATE_LABEL / TURN_HOLDER_ANNOTATION: one visible state per node (`kubectl get nodes -L
  gpu-pool.dev/turn-state`), as the operator's own nvidia.com/gpu-driver-upgrade-state, owned by the holder the
  annotation names: `up:<stack> since <time>`, `repair:<user>@<host> since <time>` or `repair:unattended@<stack>
  since <time>`.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from knowledge.gpu_operator import (
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION,
    DRIVER_UPGRADE_SKIP_LABEL,
    DRIVER_UPGRADE_STATE_LABEL,
    GPU_RESOURCE,
)

__all__ = [
    "ACTIVE_TURN_STATES",
    "DRIVER_REVISION_ANNOTATION",
    "DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION",
    "DRIVER_UPGRADE_SKIP_LABEL",
    "DRIVER_UPGRADE_STATE_LABEL",
    "FIRST_BOOT_ANNOTATION",
    "GPU_RESOURCE",
    "HEALTH_CONDITION",
    "REPAIRS_ANNOTATION",
    "ROLLOUT_ANNOTATION",
    "TIME_FORMAT",
    "TURN_HOLDER_ANNOTATION",
    "TURN_STATES",
    "TURN_STATE_LABEL",
    "WATCHER_HOLDER_PREFIX",
    "WAVE_CORDON_ANNOTATION",
    "WAVE_SKIP_ANNOTATION",
    "WAVE_STOPPED_ANNOTATION",
    "WAVE_TURN_ANNOTATION",
    "TurnState",
]

ROLLOUT_ANNOTATION = "gpu-pool.dev/rollout"
WAVE_CORDON_ANNOTATION = "gpu-pool.dev/wave-cordoned"
WAVE_TURN_ANNOTATION = "gpu-pool.dev/wave-turn"
REPAIRS_ANNOTATION = "gpu-pool.dev/repairs"
# Each first-boot step's result, written by the VM itself once its node registered (first_boot.py); doctor reads it.
FIRST_BOOT_ANNOTATION = "gpu-pool.dev/first-boot"
WAVE_STOPPED_ANNOTATION = "gpu-pool.dev/wave-stopped"
WAVE_SKIP_ANNOTATION = "gpu-pool.dev/driver-upgrade-held"
DRIVER_REVISION_ANNOTATION = "gpu-pool.dev/driver-revision-before"
TURN_STATE_LABEL = "gpu-pool.dev/turn-state"
TURN_HOLDER_ANNOTATION = "gpu-pool.dev/turn-holder"
# The in-cluster health check's Node condition (day2/doctor/health_check.py writes it, its alert and the watcher read
# it): True when every floor doctor checks in the cluster is ok; False names the lowest broken floor.
HEALTH_CONDITION = "GpuPoolHealthy"
# The holder the unattended watcher writes on a node it repairs: its own, so that a person's `gpu-pool repair`
# (repair:<user>@<host>) and a wave (up:<stack>) are told apart from it.
WATCHER_HOLDER_PREFIX = "repair:unattended@"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# A repair record is kept this long (the daily budget reads the last day of it) and at most this many entries.
REPAIR_RECORD_DAYS = 7
REPAIR_RECORD_MAX = 20


class TurnState(StrEnum):
    """A turn's visible state on its node (TURN_STATE_LABEL), as k8s-operator-libs names its upgrade states: one
    constant each, written only by node/turn.py."""

    DRAINING = "draining"
    CHANGING = "changing"
    GATING = "gating"
    STOPPED = "stopped"
    REPAIRING = "repairing"
    DONE = "done"


TURN_STATES: tuple[str, ...] = tuple(TurnState)
# States in which the holder is at work right now (a stopped turn's holder is not running).
ACTIVE_TURN_STATES: tuple[str, ...] = (TurnState.DRAINING, TurnState.CHANGING, TurnState.GATING, TurnState.REPAIRING)


def stamp(now: datetime.datetime) -> str:
    return now.strftime(TIME_FORMAT)


def holder_of(kind: str, who: str) -> str:
    """`up:<stack>`, `repair:<user>@<host>`, `repair:unattended@<stack>`: the part of TURN_HOLDER_ANNOTATION
    before ` since <time>`."""
    return f"{kind}:{who}"


# ---------------------------------------------------------------------------------------------------- reading


def labels_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def annotations_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("annotations") or {}


def resource_version(node: Mapping[str, Any]) -> Any:
    return (node.get("metadata") or {}).get("resourceVersion")


def turn_state(node: Mapping[str, Any]) -> str:
    return str(labels_of(node).get(TURN_STATE_LABEL) or "")


def turn_holder(node: Mapping[str, Any]) -> str:
    """The holder without ` since <time>` ('' when none)."""
    return str(annotations_of(node).get(TURN_HOLDER_ANNOTATION) or "").split(" since ", 1)[0]


def held_since(node: Mapping[str, Any]) -> str:
    """When the holder took the hold ('' when none)."""
    holder = str(annotations_of(node).get(TURN_HOLDER_ANNOTATION) or "")
    return holder.split(" since ", 1)[1] if " since " in holder else ""


def held(node: Mapping[str, Any]) -> bool:
    """Someone's turn holds the node: its state is set and not done."""
    return turn_state(node) not in ("", TurnState.DONE)


def held_by(node: Mapping[str, Any], holder: str) -> bool:
    return turn_holder(node) == holder


def unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def ours_cordoned(node: Mapping[str, Any]) -> bool:
    """The turn cordoned the node (WAVE_CORDON_ANNOTATION): only its end uncordons it."""
    return bool(annotations_of(node).get(WAVE_CORDON_ANNOTATION))


def ready(node: Mapping[str, Any]) -> bool:
    """The kubelet's Ready condition (a Node that never reported one is not Ready)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def ready_status(node: Mapping[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((str(c.get("status")) for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), "")


def boot_id(node: Mapping[str, Any] | None) -> str:
    return str(((node or {}).get("status") or {}).get("nodeInfo", {}).get("bootID") or "")


def allocatable_gpus(node: Mapping[str, Any]) -> str:
    return str(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0"))


def upgrade_state(node: Mapping[str, Any]) -> str:
    return str(labels_of(node).get(DRIVER_UPGRADE_STATE_LABEL) or "")


# ---------------------------------------------------------------------------------------------------- the record


def repair_records(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """REPAIRS_ANNOTATION's entries, oldest first (an unreadable record reads as none)."""
    raw = annotations_of(node).get(REPAIRS_ANNOTATION) or "[]"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return []
    return [entry for entry in parsed if isinstance(entry, dict)] if isinstance(parsed, list) else []


def kept_records(records: Sequence[Mapping[str, Any]], now: datetime.datetime) -> list[dict[str, Any]]:
    """The records of the last REPAIR_RECORD_DAYS, at most REPAIR_RECORD_MAX, oldest first."""
    oldest = now - datetime.timedelta(days=REPAIR_RECORD_DAYS)
    kept = []
    for entry in records:
        try:
            at = datetime.datetime.strptime(str(entry.get("at")), TIME_FORMAT).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
        if at >= oldest:
            kept.append(dict(entry))
    return kept[-REPAIR_RECORD_MAX:]


def records_with(node: Mapping[str, Any], entry: Mapping[str, str], now: datetime.datetime) -> str:
    """REPAIRS_ANNOTATION's value with `entry` appended (and its time), the old ones kept as kept_records says."""
    records = [*kept_records(repair_records(node), now), {"at": stamp(now), **entry}]
    return json.dumps(records[-REPAIR_RECORD_MAX:], separators=(",", ":"))
