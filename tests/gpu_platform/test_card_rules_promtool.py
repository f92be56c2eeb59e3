"""The per-card recording rules (components/gpu_platform/card_rules.py) evaluated by Prometheus' own rule engine, and
the queries the notebook reclaim policy reads them with (day2/reclaim/evidence.py): each card apart under its node's
Kubernetes name, the pod the exporter names on it, the peak over a window and how many of its minutes were recorded,
the same whichever names the exporter gives the field and the node label."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.alert_rules import build_gpu_alert_rules
from components.gpu_platform.card_rules import CARD_GROUP_NAME, CARD_HOLDER, CARD_UTILISATION
from config.monitoring import MonitoringConfig
from day2.reclaim.evidence import peak_query, samples_query
from tests.gpu_platform.alert_cases import DC1, DC3, UUIDS, dcgm, newer_names
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import ARTICLE_NODES

UTIL = "DCGM_FI_DEV_GPU_UTIL"
SECOND_UUID = "GPU-1a2b3c4d-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def card_rule_file(directory: Path) -> Path:
    rule = build_gpu_alert_rules(
        MonitoringConfig(),
        expected_slots_by_node=ARTICLE_NODES,
        namespace="gpu-operator",
        slots_per_card_by_node={node: 1 for node in ARTICLE_NODES},
    )
    (group,) = [g for g in rule["spec"]["groups"] if g["name"] == CARD_GROUP_NAME]
    path = directory / "card-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False), encoding="utf-8")
    return path


def second_card(series: str) -> str:
    return series.replace(f'UUID="{UUIDS[DC3]}", gpu="0"', f'UUID="{SECOND_UUID}", gpu="1"')


def evaluate(promtool: str, tmp_path: Path, series: list[tuple[str, str]], checks: list[dict[str, Any]]) -> None:
    rules = card_rule_file(tmp_path)
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


def card_labels(node: str, gpu: str = "0", uuid: str | None = None) -> str:
    return f'node="{node}", gpu="{gpu}", UUID="{uuid or UUIDS[node]}"'


def two_cards_and_a_shared_one() -> list[tuple[str, str]]:
    """dc3: two whole cards, resnet-0 idle on card 0 (1 %), bert-0 busy on card 1 (80 % from minute 30); dc1: a
    time-sliced card the exporter names one pod on, from minute 30 only."""
    return [
        (dcgm(UTIL, DC3, pod="resnet-0", namespace="team-a"), "1x60"),
        (second_card(dcgm(UTIL, DC3, pod="bert-0", namespace="team-b")), "0x29 80x31"),
        (dcgm(UTIL, DC1, pod="nb-2-0", namespace="team-c"), "_x30 3x30"),
    ]


def test_each_card_is_recorded_apart_under_its_nodes_kubernetes_name(promtool: str, tmp_path: Path) -> None:
    evaluate(
        promtool,
        tmp_path,
        two_cards_and_a_shared_one(),
        [
            {
                "expr": CARD_UTILISATION,
                "eval_time": "45m",
                "exp_samples": [
                    {"labels": f"{CARD_UTILISATION}{{{card_labels(DC1)}}}", "value": 3},
                    {"labels": f"{CARD_UTILISATION}{{{card_labels(DC3)}}}", "value": 1},
                    {"labels": f"{CARD_UTILISATION}{{{card_labels(DC3, '1', SECOND_UUID)}}}", "value": 80},
                ],
            },
            {
                "expr": CARD_HOLDER,
                "eval_time": "45m",
                "exp_samples": [
                    {"labels": f'{CARD_HOLDER}{{{card_labels(DC1)}, namespace="team-c", pod="nb-2-0"}}', "value": 1},
                    {"labels": f'{CARD_HOLDER}{{{card_labels(DC3)}, namespace="team-a", pod="resnet-0"}}', "value": 1},
                    {
                        "labels": f'{CARD_HOLDER}{{{card_labels(DC3, "1", SECOND_UUID)}, namespace="team-b", '
                        'pod="bert-0"}',
                        "value": 1,
                    },
                ],
            },
        ],
    )


def test_the_readers_window_queries_give_each_cards_peak_and_its_recorded_minutes(
    promtool: str, tmp_path: Path
) -> None:
    evaluate(
        promtool,
        tmp_path,
        two_cards_and_a_shared_one(),
        [
            {
                "expr": peak_query(1),
                "eval_time": "60m",
                "exp_samples": [
                    {"labels": f"{{{card_labels(DC1)}}}", "value": 3},
                    {"labels": f"{{{card_labels(DC3)}}}", "value": 1},
                    {"labels": f"{{{card_labels(DC3, '1', SECOND_UUID)}}}", "value": 80},
                ],
            },
            {
                # Recorded every minute from 0 (61 samples in a closed hour), dc1's from minute 30 only: a window
                # it covers half of, which the judgement reads as unknown.
                "expr": samples_query(1),
                "eval_time": "60m",
                "exp_samples": [
                    {"labels": f"{{{card_labels(DC1)}}}", "value": 31},
                    {"labels": f"{{{card_labels(DC3)}}}", "value": 61},
                    {"labels": f"{{{card_labels(DC3, '1', SECOND_UUID)}}}", "value": 61},
                ],
            },
        ],
    )


def test_the_newer_field_and_node_label_names_give_the_same_records(promtool: str, tmp_path: Path) -> None:
    renamed = [newer_names(series, values) for series, values in two_cards_and_a_shared_one()]
    assert all("DCGM_FI_DEV_GPU_UTIL_RATIO" in s and 'hostname="' in s for s, _ in renamed)
    evaluate(
        promtool,
        tmp_path,
        renamed,
        [
            {
                "expr": f'{CARD_HOLDER}{{pod="resnet-0"}}',
                "eval_time": "45m",
                "exp_samples": [
                    {"labels": f'{CARD_HOLDER}{{{card_labels(DC3)}, namespace="team-a", pod="resnet-0"}}', "value": 1}
                ],
            },
            {
                "expr": peak_query(1),
                "eval_time": "60m",
                "exp_samples": [
                    {"labels": f"{{{card_labels(DC1)}}}", "value": 3},
                    {"labels": f"{{{card_labels(DC3)}}}", "value": 1},
                    {"labels": f"{{{card_labels(DC3, '1', SECOND_UUID)}}}", "value": 80},
                ],
            },
        ],
    )


def test_promtool_accepts_the_rule_with_the_card_group(promtool: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [promtool, "check", "rules", str(card_rule_file(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rules found" in result.stdout
