"""`gpu-pool claims --reclaimable` against a real Prometheus (tests/reclaim/recorded_cards.py: dcgm-exporter's series
backfilled, the per-card rules recorded from them by promtool) and a dump of the pool: it prints the judgement the
policy would make, the same as day2/reclaim/judge.py on the same data, with the policy's values read from --stack."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from day2.cli import main
from day2.reclaim.evidence import PrometheusSource, read_evidence
from day2.reclaim.judge import Policy, judge
from day2.reclaim.report import judgement_json
from offline.runner import ROOT_DIR
from tests.day2.k8s_objects import NOW, NOW_TEXT, Obj
from tests.gpu_platform.prometheus_tools import require
from tests.reclaim.recorded_cards import RecordedCard, prometheus_with_cards
from tests.reclaim.world import gpu_node, kubectl_list, namespace, notebook, notebook_pod, waiting_pod, world

HOURS = 2
RAW_FROM = NOW - timedelta(hours=HOURS + 1)
RULES_FROM = NOW - timedelta(hours=HOURS, minutes=30)
NODES = {name: f"gpu-{name}" for name in ("idle", "busy", "shared", "lost", "late", "kept")}


def pool() -> list[Obj]:
    """One notebook per case, each alone on a whole card but `shared` (a card sliced 2 ways, beside a Deployment's
    pod), and a trial waiting for a GPU no node has free."""
    objects: list[Obj] = [gpu_node(node) for case, node in NODES.items() if case != "shared"]
    objects += [gpu_node(NODES["shared"], replicas=2), namespace("team-a"), namespace("ml")]
    for case, node in NODES.items():
        labels = {"gpu-pool.dev/keep-gpu": "true"} if case == "kept" else None
        objects += [notebook("team-a", case, labels=labels), notebook_pod("team-a", case, node, age=timedelta(days=3))]
    server = waiting_pod("ml", "triton-0")
    server["spec"]["nodeName"], server["status"]["phase"] = NODES["shared"], "Running"
    server["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return [*objects, server, waiting_pod("katib-sweeps", "trial-7")]


def cards() -> list[RecordedCard]:
    def recorded(case: str, percent: float, **extra: Any) -> RecordedCard:
        return RecordedCard(NODES[case], percent, ("team-a", f"{case}-0"), RAW_FROM, NOW, **extra)

    return [
        recorded("idle", 1.0),
        recorded("busy", 2.0, busy_from=NOW - timedelta(minutes=40)),
        recorded("shared", 0.0),
        recorded("kept", 0.0),
        # `late`: its exporter came up 30 minutes ago; `lost` has no series at all.
        RecordedCard(NODES["late"], 0.0, ("team-a", "late-0"), NOW - timedelta(minutes=30), NOW),
    ]


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    promtool, prometheus = require("promtool"), require("prometheus")
    directory = tmp_path_factory.mktemp("reclaim")
    with prometheus_with_cards(promtool, prometheus, cards(), RULES_FROM, NOW, directory) as url:
        yield url


@pytest.fixture
def stack_dir(tmp_path: Path) -> Path:
    """The prod stack with the policy's window at 2 h (what the recorded series cover)."""
    shutil.copy(ROOT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    stack = yaml.safe_load((ROOT_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    stack["config"]["gpu-pool:reclaim"] = {"idleNotebooks": {"idleHours": HOURS, "graceMinutes": 30}}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack), encoding="utf-8")
    return tmp_path


def claims(tmp_path: Path, url: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(kubectl_list(pool())), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    argv = ["claims", "--reclaimable", "--from", str(path), "--now", NOW_TEXT, "--prometheus", url, *extra]
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def reclaimable_json(tmp_path: Path, url: str, stack_dir: Path) -> dict[str, Any]:
    code, out, err = claims(tmp_path, url, "--stack", "prod", "--stack-dir", str(stack_dir), "-o", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_it_prints_one_decision_per_notebook_with_its_reason(
    tmp_path: Path, prometheus_url: str, stack_dir: Path
) -> None:
    by_name = {d["notebook"]: d for d in reclaimable_json(tmp_path, prometheus_url, stack_dir)["decisions"]}

    assert {name: (d["action"], d["reason"]) for name, d in by_name.items()} == {
        "idle": ("warn", "idle"),
        "busy": ("leave", "busy"),
        "shared": ("leave", "ambiguous-card"),
        "lost": ("leave", "unknown-series"),
        "late": ("leave", "unknown-series"),
        "kept": ("leave", "excluded"),
    }
    assert by_name["idle"]["stopAt"] == "2026-05-04T10:30:00Z"
    assert "pod katib-sweeps/trial-7 waits for 1 nvidia.com/gpu" in by_name["idle"]["detail"]
    assert by_name["busy"]["peakPercent"] == 80
    assert "was recorded 30 of the window's 120 minutes" in by_name["late"]["detail"]


def test_its_answer_is_the_judgement_of_the_same_data(tmp_path: Path, prometheus_url: str, stack_dir: Path) -> None:
    policy = Policy(idle_hours=HOURS, idle_percent=5, grace_minutes=30)
    evidence = read_evidence(PrometheusSource(prometheus_url), HOURS, NOW)
    expected = judgement_json(judge(world(pool()), evidence, policy, NOW), policy, NOW, dry_run=False)

    assert reclaimable_json(tmp_path, prometheus_url, stack_dir) == expected


def test_without_a_stack_the_defaults_judge_a_24_hour_window(tmp_path: Path, prometheus_url: str) -> None:
    code, out, err = claims(tmp_path, prometheus_url, "-o", "json")

    assert code == 0, err
    document = json.loads(out)
    assert document["policy"]["idleHours"] == 24
    # Two hours of series is no evidence for a day: nothing is idle.
    assert {d["reason"] for d in document["decisions"]} <= {"unknown-series", "ambiguous-card", "excluded"}


def test_the_table_names_each_notebook_its_action_and_why(tmp_path: Path, prometheus_url: str, stack_dir: Path) -> None:
    code, out, err = claims(tmp_path, prometheus_url, "--stack", "prod", "--stack-dir", str(stack_dir))

    assert code == 0, err
    assert out.splitlines()[2].split() == [
        "NAMESPACE",
        "NOTEBOOK",
        "ACTION",
        "REASON",
        "NODE",
        "GPUS",
        "HELD",
        "PEAK",
        "WHY",
    ]
    row = next(line for line in out.splitlines() if line.startswith("team-a") and " idle " in line)
    assert row.split()[:8] == ["team-a", "idle", "WARN", "idle", "gpu-idle", "1", "72.0h", "1%"]
    assert "Pods waiting for nvidia.com/gpu no node has room for: katib-sweeps/trial-7 (1)" in out


def test_it_needs_a_prometheus(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()

    code = main(["claims", "--reclaimable", "--from", "examples/day2/notebooks.json"], out=out, err=err)

    assert code == 2 and "pass --prometheus URL" in err.getvalue()


def test_a_prometheus_that_does_not_answer_is_one_line_naming_it(tmp_path: Path) -> None:
    code, _, err = claims(tmp_path, "http://127.0.0.1:9")

    assert code == 2
    assert "--prometheus http://127.0.0.1:9: cannot reach it" in err and "Traceback" not in err
