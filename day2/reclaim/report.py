"""The reclaim judgement as people and scripts read it: one JSON shape, written by `gpu-pool claims --reclaimable -o
json` and, one decision a line, by the policy in the cluster (its log), so the two can be compared field for field;
and the table `claims --reclaimable` prints. The JSON keys are a contract: never rename one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TextIO

from day2.reclaim.judge import Action, Decision, Judgement, NotBack, Policy
from day2.text_table import write_table


def _time(at: datetime | None) -> str | None:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else None


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "namespace": decision.namespace,
        "notebook": decision.notebook,
        "action": decision.action.value,
        "reason": decision.reason.value,
        "detail": decision.detail,
        "pod": decision.pod,
        "node": decision.node,
        "gpus": decision.gpus,
        "gpuShare": round(decision.gpu_share, 4),
        "heldHours": round(decision.held_seconds / 3600, 2),
        "peakPercent": decision.peak_percent,
        "stopAt": _time(decision.stop_at),
        "withdrawWarning": decision.withdraw_warning,
    }


def not_back_json(stop: NotBack) -> dict[str, Any]:
    return {
        "namespace": stop.namespace,
        "notebook": stop.notebook,
        "pod": stop.pod,
        "node": stop.node,
        "gpus": stop.gpus,
        "stoppedAt": _time(stop.since),
        "terminating": stop.terminating,
        "finalizers": list(stop.finalizers),
        "pastDeadline": stop.past_deadline,
    }


def judgement_json(judgement: Judgement, policy: Policy, now: datetime, *, dry_run: bool) -> dict[str, Any]:
    return {
        "at": _time(now),
        "dryRun": dry_run,
        "policy": {
            "idleHours": policy.idle_hours,
            "idleUtilisationPercent": policy.idle_percent,
            "onlyWhenContended": policy.only_when_contended,
            "graceMinutes": policy.grace_minutes,
            "exclusionLabel": policy.exclusion_label,
            "maxPerHour": policy.max_per_hour,
            "cardBackMinutes": policy.card_back_minutes,
        },
        "decisions": [decision_json(d) for d in judgement.decisions],
        "notBack": [not_back_json(s) for s in judgement.not_back],
        "ambiguousCards": dict(sorted(judgement.ambiguous.items())),
        "waiting": [{"namespace": w.namespace, "pod": w.pod, "gpus": w.gpus} for w in judgement.waiting],
        "fullQuotas": list(judgement.full_quotas),
        "stopsLastHour": judgement.stops_last_hour,
    }


_WORDS = {Action.STOP: "STOP", Action.WARN: "WARN", Action.WAIT: "WAIT", Action.LEAVE: "leave"}


def print_judgement(judgement: Judgement, policy: Policy, out: TextIO) -> None:
    """The decisions, one row per notebook holding or having held a GPU, then the contention and the stops whose card
    is not back."""
    rows = [
        (
            d.namespace,
            d.notebook,
            _WORDS[d.action],
            d.reason.value,
            d.node or "-",
            str(d.gpus) if d.gpus else "-",
            f"{d.held_seconds / 3600:.1f}h" if d.held_seconds else "-",
            "-" if d.peak_percent is None else f"{d.peak_percent:g}%",
            d.detail + (f" (stop after {_time(d.stop_at)})" if d.stop_at and d.action is not Action.STOP else ""),
        )
        for d in judgement.decisions
    ]
    out.write(
        f"Idle: every card under {policy.idle_percent:g}% for {policy.idle_hours} h; "
        f"{'only while GPUs are wanted' if policy.only_when_contended else 'whether or not GPUs are wanted'}; "
        f"warned {policy.grace_minutes} min first; at most {policy.max_per_hour} stop(s) an hour, one at a time.\n\n"
    )
    if rows:
        write_table(("NAMESPACE", "NOTEBOOK", "ACTION", "REASON", "NODE", "GPUS", "HELD", "PEAK", "WHY"), rows, out)
    else:
        out.write("No Kubeflow Notebooks found.\n")
    out.write("\n")
    waiting = ", ".join(f"{w.namespace}/{w.pod} ({w.gpus})" for w in judgement.waiting) or "none"
    out.write(f"Pods waiting for nvidia.com/gpu no node has room for: {waiting}\n")
    out.write(f"Namespaces at their GPU quota: {', '.join(judgement.full_quotas) or 'none'}\n")
    out.write(f"Stopped by the policy in the last hour: {judgement.stops_last_hour} of {policy.max_per_hour}\n")
    for stop in judgement.not_back:
        state = "Terminating" if stop.terminating else "not deleted"
        late = "past its deadline" if stop.past_deadline else "within its deadline"
        out.write(
            f"Not back: {stop.namespace}/{stop.pod} on {stop.node} still holds {stop.gpus} nvidia.com/gpu, {state}, "
            f"finalizers {list(stop.finalizers)}, stopped {_time(stop.since)} ({late})\n"
        )
