"""The usage recording rules (components/gpu_platform/usage_rules.py) evaluated by Prometheus' own rule engine:
GPUs held per namespace, time-slice aware, and GPU-hours over a range from the recorded series."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.alert_rules import build_gpu_alert_rules
from components.gpu_platform.dashboard import build_dashboard
from components.gpu_platform.usage_rules import (
    GPUS_HELD,
    GPUS_HELD_IDLE,
    GPUS_USED,
    SLOTS_HELD,
    SLOTS_PER_CARD,
    USAGE_GROUP_NAME,
    gpu_hours_query,
)
from config.monitoring import MonitoringConfig
from tests.gpu_platform.alert_cases import DC1, DC2, DC3, OTHER, dcgm, gpu_request, newer_names, phase
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import ARTICLE_NODES

# The article's lab: dc1 and dc2 time-sliced x4 (one card each), dc3 one whole card.
SLOTS_PER_CARD_BY_NODE = {DC1: 4, DC2: 4, DC3: 1}
HOUR = "60"  # a series present from 0 to 60m at 1m (61 samples)


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def usage_rule_file(directory: Path) -> Path:
    rule = build_gpu_alert_rules(
        MonitoringConfig(),
        expected_slots_by_node=ARTICLE_NODES,
        namespace="gpu-operator",
        slots_per_card_by_node=SLOTS_PER_CARD_BY_NODE,
    )
    (group,) = [g for g in rule["spec"]["groups"] if g["name"] == USAGE_GROUP_NAME]
    path = directory / "usage-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False), encoding="utf-8")
    return path


def running(namespace: str, pod: str, node: str, slots: int = 1, minutes: int = 60) -> list[tuple[str, str]]:
    """A pod Running for `minutes` from 0: sampled at 0 .. minutes-1, then gone (a stale marker, as Prometheus
    writes when kube-state-metrics stops exporting it), so the rule records it `minutes` times."""
    alive = f"x{minutes - 1} stale"
    return [
        (gpu_request(namespace, pod, node), f"{slots}{alive}"),
        (phase(namespace, pod, "Running"), f"1{alive}"),
        (phase(namespace, pod, "Pending"), f"0{alive}"),
    ]


def pending_bound(namespace: str, pod: str, node: str) -> list[tuple[str, str]]:
    return [
        (gpu_request(namespace, pod, node), f"1x{HOUR}"),
        (phase(namespace, pod, "Running"), f"0x{HOUR}"),
        (phase(namespace, pod, "Pending"), f"1x{HOUR}"),
    ]


def cpu_only(namespace: str, pod: str, node: str) -> list[tuple[str, str]]:
    cpu = (
        f'kube_pod_container_resource_requests{{namespace="{namespace}", pod="{pod}", container="main", '
        f'node="{node}", resource="cpu", unit="core", uid="{pod}-uid", {OTHER}}}'
    )
    return [(cpu, f"2x{HOUR}"), (phase(namespace, pod, "Running"), f"1x{HOUR}")]


def lab_series() -> list[tuple[str, str]]:
    """team-a: 4 pods x 1 slot on dc1 (x4), team-b: one pod on dc3's whole card (50 % busy), team-c: a bound
    Pending pod on dc2, team-d: a CPU-only pod, team-e: one pod alone on dc2 (80 % busy; a single holder)."""
    series = [s for i in range(4) for s in running("team-a", f"nb-{i}", DC1)]
    series += running("team-b", "train", DC3)
    series += pending_bound("team-c", "waiting", DC2)
    series += cpu_only("team-d", "web", DC1)
    series += running("team-e", "solo", DC2)
    # The exporter names one holder per card; on dc1 it names one of team-a's four pods.
    series += [
        (dcgm("DCGM_FI_DEV_GPU_UTIL", DC1, pod="nb-0", namespace="team-a"), f"90x{HOUR}"),
        (dcgm("DCGM_FI_DEV_GPU_UTIL", DC3, pod="train", namespace="team-b"), f"50x{HOUR}"),
        (dcgm("DCGM_FI_DEV_GPU_UTIL", DC2, pod="solo", namespace="team-e"), f"80x{HOUR}"),
    ]
    return series


def plain_pod_labels(series: str, values: str) -> tuple[str, str]:
    """The exporter's series scraped with honorLabels true: its pod labels keep their own names."""
    if not series.startswith("DCGM_"):
        return series, values
    for name in ("container", "namespace", "pod"):
        series = series.replace(f', {name}="nvidia-dcgm-exporter', f', scrape_{name}="nvidia-dcgm-exporter')
        series = series.replace(f', {name}="gpu-operator"', f', scrape_{name}="gpu-operator"')
    return series.replace("exported_", ""), values


def samples(by_namespace: dict[str, float], record: str = "") -> list[dict[str, Any]]:
    """Expected samples by namespace; `record`: the recorded series itself (it keeps its name)."""
    return [{"labels": f'{record}{{namespace="{ns}"}}', "value": value} for ns, value in sorted(by_namespace.items())]


def evaluate(promtool: str, tmp_path: Path, series: list[tuple[str, str]], checks: list[dict[str, Any]]) -> None:
    rules = usage_rule_file(tmp_path)
    tests = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": checks,
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


HELD_HOURS = {"team-a": 1.0, "team-b": 1.0, "team-e": 0.25}


def test_four_pods_on_a_quarter_card_each_for_an_hour_hold_one_gpu_hour_as_does_a_whole_card(
    promtool: str, tmp_path: Path
) -> None:
    evaluate(
        promtool,
        tmp_path,
        lab_series(),
        [
            # Pending team-c and CPU-only team-d hold nothing: no series at all.
            {"expr": gpu_hours_query(GPUS_HELD, "1h"), "eval_time": "60m", "exp_samples": samples(HELD_HOURS)},
            {"expr": GPUS_HELD, "eval_time": "30m", "exp_samples": samples(HELD_HOURS, GPUS_HELD)},
            {
                "expr": gpu_hours_query(SLOTS_HELD, "1h"),
                "eval_time": "60m",
                "exp_samples": samples({"team-a": 4.0, "team-b": 1.0, "team-e": 1.0}),
            },
        ],
    )


def test_a_pending_pod_holds_zero_gpu_hours(promtool: str, tmp_path: Path) -> None:
    evaluate(
        promtool,
        tmp_path,
        pending_bound("team-c", "waiting", DC2),
        [
            {"expr": f'{GPUS_HELD}{{namespace="team-c"}}', "eval_time": "30m", "exp_samples": []},
            {
                "expr": gpu_hours_query(GPUS_HELD, "1h") + " or vector(0)",
                "eval_time": "60m",
                "exp_samples": [{"labels": "{}", "value": 0}],
            },
        ],
    )


def test_half_an_hour_on_a_whole_card_is_half_a_gpu_hour(promtool: str, tmp_path: Path) -> None:
    series = running("team-b", "train", DC3, minutes=30)
    evaluate(
        promtool,
        tmp_path,
        series,
        [{"expr": gpu_hours_query(GPUS_HELD, "1h"), "eval_time": "60m", "exp_samples": samples({"team-b": 0.5})}],
    )


def test_the_slots_per_card_series_has_one_value_per_domain_from_its_profile(promtool: str, tmp_path: Path) -> None:
    evaluate(
        promtool,
        tmp_path,
        [],
        [
            {
                "expr": SLOTS_PER_CARD,
                "eval_time": "1m",
                "exp_samples": [
                    {"labels": f'{SLOTS_PER_CARD}{{node="{node}"}}', "value": slots}
                    for node, slots in sorted(SLOTS_PER_CARD_BY_NODE.items())
                ],
            }
        ],
    )


USED = {"team-b": 0.5, "team-e": 0.8}


@pytest.mark.parametrize(
    "variant",
    ["4.8 names, exported_* pod labels", "4.10 names and hostname", "pod labels under their own names"],
)
def test_gpus_used_is_recorded_only_on_single_holder_cards_whatever_the_exporter_s_names(
    promtool: str, tmp_path: Path, variant: str
) -> None:
    series = lab_series()
    if variant.startswith("4.10"):
        series = [newer_names(s, v) for s, v in series]
    elif variant.startswith("pod labels"):
        series = [plain_pod_labels(s, v) for s, v in series]
    # team-a shares dc1's card four ways: the exporter's 90 % is the card's, not nb-0's, so team-a gets no series.
    evaluate(
        promtool, tmp_path, series, [{"expr": GPUS_USED, "eval_time": "30m", "exp_samples": samples(USED, GPUS_USED)}]
    )


def test_held_hours_on_idle_cards_count_only_where_every_card_of_the_node_was_below_the_threshold(
    promtool: str, tmp_path: Path
) -> None:
    # Default threshold 5 %: dc3 at 2 % is idle (team-b's whole card), dc1 at 90 % and dc2 at 80 % are not.
    series = [(s, v.replace("50x", "2x")) if "DCGM" in s and DC3 in s else (s, v) for s, v in lab_series()]
    evaluate(
        promtool,
        tmp_path,
        series,
        [{"expr": gpu_hours_query(GPUS_HELD_IDLE, "1h"), "eval_time": "60m", "exp_samples": samples({"team-b": 1.0})}],
    )


def test_the_variants_really_rename_what_they_claim() -> None:
    newer = " ".join(newer_names(s, v)[0] for s, v in lab_series())
    plain = " ".join(plain_pod_labels(s, v)[0] for s, v in lab_series())

    assert "DCGM_FI_DEV_GPU_UTIL_RATIO{hostname=" in newer and "DCGM_FI_DEV_GPU_UTIL{" not in newer
    assert "exported_" not in plain and 'namespace="team-b"' in plain and 'pod="train"' in plain


def test_promtool_accepts_the_rule_with_the_usage_group(promtool: str, tmp_path: Path) -> None:
    path = usage_rule_file(tmp_path)
    result = subprocess.run(
        [promtool, "check", "rules", path.name], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(SLOTS_PER_CARD_BY_NODE) + 4} rules found" in result.stdout


def test_the_dashboard_usage_row_shows_the_same_gpu_hours_and_held_gpus(promtool: str, tmp_path: Path) -> None:
    queries = {
        target["expr"]
        for panel in build_dashboard(MonitoringConfig())["panels"]
        for target in panel.get("targets") or []
        if GPUS_HELD in target["expr"] or SLOTS_HELD in target["expr"]
    }
    hours = gpu_hours_query(GPUS_HELD, "$__range")

    assert {hours, GPUS_HELD, f"sum({GPUS_HELD})", gpu_hours_query(SLOTS_HELD, "$__range")} == queries
    evaluate(
        promtool,
        tmp_path,
        lab_series(),
        [
            {"expr": hours.replace("$__range", "1h"), "eval_time": "60m", "exp_samples": samples(HELD_HOURS)},
            {"expr": f"sum({GPUS_HELD})", "eval_time": "30m", "exp_samples": [{"labels": "{}", "value": 2.25}]},
        ],
    )
