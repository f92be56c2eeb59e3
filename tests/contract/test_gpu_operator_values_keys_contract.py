"""The chart's key tree gpu-pool checks `extraValues` against is the pinned charts' values.yaml, regenerated from
../shared/upstream; a stale file fails here with the command that rewrites it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from components.gpu_platform.operator_values import build_gpu_operator_values
from config.gpu_operator import GpuOperatorConfig
from knowledge.gpu_operator_chart import TEMPLATE_ONLY_KEYS
from knowledge.gpu_operator_values import DATA_FILE, known_chart_versions, unknown_keys, values_tree
from tests.contract.write_values_keys import CHART_VERSIONS, render


def test_the_committed_key_tree_is_what_the_upstream_charts_generate_now(upstream: Path) -> None:
    assert DATA_FILE.read_text(encoding="utf-8") == render(upstream), (
        "knowledge/data/gpu_operator_values_keys.json is stale: run "
        "GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_values_keys"
    )


def test_the_tree_covers_the_default_chart_and_the_next_one() -> None:
    assert set(CHART_VERSIONS) == set(known_chart_versions())
    assert GpuOperatorConfig().chart_version in known_chart_versions()


@pytest.mark.parametrize("chart", CHART_VERSIONS)
def test_every_value_gpu_pool_sends_is_one_the_chart_reads(chart: str) -> None:
    values = build_gpu_operator_values(
        _operator(chart),
        time_slicing_configmap="time-slicing-config",
        default_profile="whole",
        dcgm_metrics_configmap="dcgm-custom-metrics",
        dcgm_metrics_digest="0123456789abcdef",
        service_monitor=True,
    )
    tree = values_tree(chart)
    assert tree is not None
    # Keys the templates read although values.yaml only shows them in a comment (dcgmExporter.config.name).
    template_only = [
        path for path, _ in unknown_keys(tree, values) if any(k.startswith(path) for k in TEMPLATE_ONLY_KEYS)
    ]
    found = [path for path, _ in unknown_keys(tree, values) if path not in template_only]

    assert found == []


def _operator(chart: str, extra: dict[str, Any] | None = None) -> GpuOperatorConfig:
    # The driver table may not know the newer chart yet (issue 18 adds it); the key tree is what is tested here.
    data = {"chartVersion": chart, "allowUnsupportedDriver": True, "extraValues": extra or {}}
    return GpuOperatorConfig.model_validate(data)


def _refusal(chart: str, extra: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        _operator(chart, extra)
    return str(caught.value)


@pytest.mark.parametrize("chart", CHART_VERSIONS)
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"driver": {"rdma": {"enable": True}}}, "'driver.rdma.enable' is not a value of the gpu-operator chart"),
        ({"dcgmExporter": {"serviceMonitor": {"enable": True}}}, "did you mean 'dcgmExporter.serviceMonitor.enabled'"),
        ({"node-feature-discovery": {"worker": {"tolerationz": []}}}, "'node-feature-discovery.worker.tolerationz'"),
    ],
    ids=["rdma.enable", "serviceMonitor.enable", "an NFD subchart key"],
)
def test_a_misspelt_key_below_the_top_level_is_refused_with_the_nearest_one(
    chart: str, extra: dict[str, Any], message: str
) -> None:
    assert message in _refusal(chart, extra)


@pytest.mark.parametrize("chart", CHART_VERSIONS)
@pytest.mark.parametrize(
    "extra",
    [
        {"operator": {"annotations": {"example.com/owner": "lab"}}},
        {"driver": {"env": [{"name": "NVIDIA_DRIVER_DEBUG", "value": "1"}]}},
        {"validator": {"resources": {"limits": {"cpu": "1"}}}},
        {"daemonsets": {"labels": {"team": "ml"}, "annotations": {"a": "b"}}},
        {"node-feature-discovery": {"worker": {"config": {"sources": {"pci": {"deviceLabelFields": ["vendor"]}}}}}},
        {"dcgmExporter": {"serviceMonitor": {"additionalLabels": {"release": "prometheus"}}}},
    ],
    ids=["annotations", "env", "resources", "daemonset labels", "NFD worker config", "serviceMonitor labels"],
)
def test_keys_inside_maps_the_chart_passes_through_are_the_users_own(chart: str, extra: dict[str, Any]) -> None:
    assert _operator(chart, extra).extra_values == extra
