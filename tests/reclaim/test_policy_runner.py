"""The policy's pass (day2/reclaim/policy.py) through the one Kubernetes client (node/kube.py Kube) against an API that
keeps its objects and authorizes each request with the policy's own ClusterRole (components/reclaim/api.py), as the
RBAC authorizer reads a request off its method and path: what a warning, a stop and a withdrawn warning write on the
Notebook, the Events it posts, what dryRun leaves untouched, what its log and metrics say."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest

from components.reclaim.api import POLICY_API, Request, cluster_rules
from components.reclaim.names import (
    NOT_BACK_SECONDS,
    RECLAIMED_AT,
    RECLAIMED_BY,
    RECLAIMED_HELD_HOURS,
    RECLAIMED_NODE,
    RECLAIMED_PEAK_PERCENT,
    RECLAIMED_POD,
    STOP_AFTER,
    STOPS,
    WARNED_AT,
)
from components.unattended.watcher_api import authorized, request_of
from day2.reclaim import policy as runner_module
from day2.reclaim.evidence import Evidence
from day2.reclaim.judge import Action, Reason
from day2.reclaim.policy import Metrics, PolicyFacts, Reclaimer, one_pass
from day2.reclaim.report import decision_json
from node.kube import Answer, Kube
from tests.day2.k8s_objects import NOW, Obj
from tests.reclaim.world import (
    POLICY,
    WHOLE,
    card,
    evidence,
    gpu_node,
    notebook,
    notebook_pod,
    stopped_by_policy,
    waiting_pod,
    warned,
)

PLURALS = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces", "ResourceQuota": "resourcequotas"}


def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch, as the API server applies application/merge-patch+json."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class ApiServer:
    """The objects of a cluster, answering the policy's requests and refusing what its ClusterRole does not grant."""

    objects: list[Obj]
    sent: list[tuple[str, str, Any]] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    used: set[Request] = field(default_factory=set)
    conflict_once: bool = False

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        self.sent.append((method, path, json.loads(body) if body else None))
        asked = request_of(method, path)
        if not authorized(asked, cluster_rules(), {}):
            return Answer(403, json.dumps({"message": f"forbidden: {asked}"}).encode(), None, "Forbidden")
        self.used.add(Request(asked.group, asked.resource, asked.verb))
        if method == "GET":
            kind = next(k for k, plural in [*PLURALS.items(), ("Notebook", "notebooks")] if path.endswith(plural))
            items = [o for o in self.objects if o["kind"] == kind]
            return Answer(200, json.dumps({"items": items}).encode())
        if method == "POST":
            self.events.append(json.loads(body or b"{}"))
            return Answer(201, body or b"{}")
        name = path.rsplit("/", 1)[-1]
        (target,) = [o for o in self.objects if o["kind"] == "Notebook" and o["metadata"]["name"] == name]
        patch = json.loads(body or b"{}")
        wanted = patch.get("metadata", {}).pop("resourceVersion", None)
        if self.conflict_once or (wanted and wanted != target["metadata"]["resourceVersion"]):
            self.conflict_once = False
            return Answer(409, json.dumps({"message": "the object has been modified"}).encode(), None, "Conflict")
        merge(target, patch)
        target["metadata"]["resourceVersion"] = str(int(target["metadata"]["resourceVersion"]) + 1)
        return Answer(200, json.dumps(target).encode())


def reclaimer(server: ApiServer, cards: Evidence, monkeypatch: pytest.MonkeyPatch, **policy: Any) -> Reclaimer:
    monkeypatch.setattr(runner_module, "read_evidence", lambda source, hours, at: cards)
    dry = bool(policy.pop("dry_run", False))
    facts = PolicyFacts(replace(POLICY, **policy), "http://prometheus.test:9090", dry, 5)
    return Reclaimer(Kube(server), facts, io.StringIO(), Metrics(dry_run=dry), host="policy-0", clock=lambda: NOW)


def pool(**notebook_args: Any) -> list[Obj]:
    return [
        gpu_node(WHOLE),
        notebook("team-a", "resnet", **notebook_args),
        notebook_pod("team-a", "resnet", WHOLE),
        waiting_pod("katib-sweeps", "trial-7"),
    ]


IDLE = evidence(card(WHOLE, holders=[("team-a", "resnet-0")]))


def resnet(server: ApiServer) -> Obj:
    (found,) = [o for o in server.objects if o["kind"] == "Notebook" and o["metadata"]["name"] == "resnet"]
    return found


def test_a_warning_is_two_annotations_and_an_event_naming_when_and_how_to_keep_the_card(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = ApiServer(pool())
    judgement = one_pass(reclaimer(server, IDLE, monkeypatch))

    assert judgement.decisions[0].action is Action.WARN
    notes = resnet(server)["metadata"]["annotations"]
    assert (notes[WARNED_AT], notes[STOP_AFTER]) == ("2026-05-04T10:00:00Z", "2026-05-04T11:00:00Z")
    assert "kubeflow-resource-stopped" not in notes
    (event,) = server.events
    assert event["involvedObject"]["kind"] == "Notebook" and event["involvedObject"]["name"] == "resnet"
    assert event["reason"] == "GpuReclaimWarning" and event["metadata"]["namespace"] == "team-a"
    assert "after 2026-05-04T11:00:00Z" in event["message"]
    assert "kubectl -n team-a label notebook resnet gpu-pool.dev/keep-gpu=true" in event["message"]


def test_a_stop_is_kubeflows_annotation_with_who_why_what_and_how_long(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = warned(NOW - timedelta(minutes=70), NOW - timedelta(minutes=10))
    server = ApiServer(pool(annotations=notes))
    runner = reclaimer(server, IDLE, monkeypatch)

    one_pass(runner)

    written = resnet(server)["metadata"]["annotations"]
    assert written["kubeflow-resource-stopped"] == written[RECLAIMED_AT] == "2026-05-04T10:00:00Z"
    assert written[RECLAIMED_BY].startswith("gpu-pool-reclaim")
    assert (written[RECLAIMED_POD], written[RECLAIMED_NODE]) == ("resnet-0", WHOLE)
    assert (written[RECLAIMED_HELD_HOURS], written[RECLAIMED_PEAK_PERCENT]) == ("240.0", "1")
    assert WARNED_AT not in written and STOP_AFTER not in written
    # The stop carried the resourceVersion it was judged on.
    patch = next(body for method, _, body in server.sent if method == "PATCH")
    assert patch["metadata"]["resourceVersion"] == "41207"
    assert [e["reason"] for e in server.events] == ["GpuReclaimed"]
    assert f'{STOPS}{{namespace="team-a"}} 1' in runner.metrics.text()


def test_a_notebook_changed_since_it_was_read_is_not_stopped_on_stale_evidence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = ApiServer(pool(annotations=warned(NOW - timedelta(minutes=70), NOW - timedelta(minutes=10))))
    server.conflict_once = True
    runner = reclaimer(server, IDLE, monkeypatch)

    one_pass(runner)

    assert "kubeflow-resource-stopped" not in resnet(server)["metadata"]["annotations"]
    assert server.events == [] and "changed since it was read" in runner.out.getvalue()  # type: ignore[attr-defined]


def test_a_warning_that_no_longer_holds_is_withdrawn_with_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = evidence(card(WHOLE, peak=60.0, holders=[("team-a", "resnet-0")]))
    server = ApiServer(pool(annotations=warned(NOW - timedelta(minutes=5), NOW + timedelta(minutes=55))))

    one_pass(reclaimer(server, busy, monkeypatch))

    assert WARNED_AT not in resnet(server)["metadata"].get("annotations", {})
    assert [e["reason"] for e in server.events] == ["GpuReclaimWithdrawn"]


def test_dry_run_changes_nothing_and_logs_the_same_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    acting, dry = ApiServer(pool()), ApiServer(pool())
    before = copy.deepcopy(dry.objects)

    acted = one_pass(reclaimer(acting, IDLE, monkeypatch))
    runner = reclaimer(dry, IDLE, monkeypatch, dry_run=True)
    reported = one_pass(runner)

    assert reported.decisions == acted.decisions
    assert [m for m, _, _ in dry.sent] == ["GET"] * 5 and dry.objects == before
    logged = [
        json.loads(line.split(" decision ", 1)[1])
        for line in runner.out.getvalue().splitlines()  # type: ignore[attr-defined]
        if " decision " in line
    ]
    assert logged == [decision_json(d) for d in reported.decisions]
    assert "gpu_pool_reclaim_dry_run 1" in runner.metrics.text()


def test_a_stop_whose_pod_a_finalizer_holds_is_exported_with_its_finalizers(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = stopped_by_policy(NOW - timedelta(minutes=20), "old-0", WHOLE)
    objects = [
        gpu_node(WHOLE),
        notebook("team-a", "old", annotations=stopped),
        notebook_pod("team-a", "old", WHOLE, deleting=True, finalizers=["example.com/hold"]),
    ]
    runner = reclaimer(ApiServer(objects), evidence(), monkeypatch)

    judgement = one_pass(runner)

    assert judgement.decisions[0].reason is Reason.STOPPING
    line = next(x for x in runner.metrics.text().splitlines() if x.startswith(NOT_BACK_SECONDS + "{"))
    assert 'pod="old-0"' in line and 'phase="Terminating"' in line and 'finalizers="example.com/hold"' in line
    assert line.endswith(" 1200")


def test_gpu_hours_freed_count_the_stopped_cards_that_stay_free(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = stopped_by_policy(NOW - timedelta(hours=2), "old-0", WHOLE)
    server = ApiServer([gpu_node(WHOLE), notebook("team-a", "old", annotations=stopped)])
    runner = reclaimer(server, evidence(), monkeypatch)
    one_pass(runner)
    runner.clock = lambda: NOW + timedelta(minutes=30)

    one_pass(runner)

    assert runner.metrics.freed_gpu_hours == pytest.approx(0.5)


def test_every_request_of_every_pass_is_in_the_policys_table_and_every_row_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    used: set[Request] = set()
    for objects in (pool(), pool(annotations=warned(NOW - timedelta(minutes=70), NOW - timedelta(minutes=10)))):
        server = ApiServer(objects)
        one_pass(reclaimer(server, IDLE, monkeypatch))
        used |= server.used
        assert not any("forbidden" in str(body) for _, _, body in server.sent)

    assert used == {r for rows in POLICY_API.values() for r in rows}


def test_a_request_outside_the_table_is_refused_by_its_rules() -> None:
    for method, path in (
        ("GET", "/api/v1/namespaces/team-a/secrets"),
        ("DELETE", "/apis/kubeflow.org/v1/namespaces/team-a/notebooks/resnet"),
        ("PUT", "/apis/kubeflow.org/v1/namespaces/team-a/notebooks/resnet"),
        ("PATCH", "/api/v1/namespaces/team-a/pods/resnet-0"),
        ("GET", "/apis/kubeflow.org/v1/namespaces/team-a/notebooks/resnet"),
    ):
        assert not authorized(request_of(method, path), cluster_rules(), {}), (method, path)


def test_a_prometheus_without_card_series_is_said_and_nothing_is_judged_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ApiServer(pool())
    runner = reclaimer(server, evidence(), monkeypatch)

    judgement = one_pass(runner)

    assert [d.reason for d in judgement.decisions] == [Reason.UNKNOWN_SERIES]
    assert "has no per-card series" in runner.out.getvalue()  # type: ignore[attr-defined]
    assert [m for m, _, _ in server.sent] == ["GET"] * 5
