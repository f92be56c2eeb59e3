"""A Job a turn runs on its node and waits for (the smoke test after a repair, the watcher's node-check): created,
awaited until Complete or Failed, its pod's log read. The same for `gpu-pool repair` and the watcher."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from node.turn import Turn
from node.waiting import StepFailed


def job_path(namespace: str, name: str = "") -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs" + (f"/{name}" if name else "")


def conditions(job: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(c.get("type")): str(c.get("status")) for c in ((job or {}).get("status") or {}).get("conditions") or []}


def run_job(turn: Turn, job: Mapping[str, Any], minutes: float, what: str) -> tuple[str, str]:
    """Creates `job` and waits until it ends: ("Complete" | "Failed", the Failed condition's reason and message)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    turn.kube.create(job_path(namespace), dict(job))
    ended: list[tuple[str, str]] = []

    def finished() -> tuple[bool, str, str]:
        found = turn.kube.get(job_path(namespace, name))
        found_conditions = {c.get("type"): c for c in ((found or {}).get("status") or {}).get("conditions") or []}
        failed = found_conditions.get("Failed") or {}
        if failed.get("status") == "True":
            ended.append(("Failed", ": ".join(str(failed.get(k)) for k in ("reason", "message") if failed.get(k))))
            return True, "Failed", ""
        if (found_conditions.get("Complete") or {}).get("status") == "True":
            ended.append(("Complete", ""))
            return True, "Complete", ""
        active = ((found or {}).get("status") or {}).get("active") or 0
        return False, f"{active} active", f"the Job did not finish: kubectl -n {namespace} get pods -l job-name={name}"

    turn.waiter(f"{what} {namespace}/{name} on {turn.node}", minutes).until(finished)
    return ended[-1]


def smoke_test(turn: Turn, job: Mapping[str, Any], minutes: float) -> None:
    """The smoke Job again (a repair's, under a name of its own); StepFailed naming its log when it fails."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    outcome, why = run_job(turn, job, minutes, "the smoke test")
    if outcome == "Failed":
        raise StepFailed(
            f"the smoke test {namespace}/{name} failed on {turn.node} ({why}): kubectl -n {namespace} logs job/{name}"
        )


def job_log(turn: Turn, namespace: str, name: str) -> str:
    """The log of the Job's (first) pod; StepFailed when it left none."""
    selector = urllib.parse.quote(f"job-name={name}")
    pods = turn.kube.list(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}", "Pod")
    if not pods:
        raise StepFailed(f"Job {namespace}/{name} left no pod")
    return turn.kube.text(f"/api/v1/namespaces/{namespace}/pods/{pods[0]['metadata']['name']}/log")
