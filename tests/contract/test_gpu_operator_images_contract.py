"""The images the air-gap inventory lists for the chart are the pinned charts' values.yaml, regenerated from the
upstream data; a stale file fails here with the command that rewrites it."""

from __future__ import annotations

from pathlib import Path

from knowledge.gpu_operator_images import DATA_FILE, default_images
from tests.contract.write_images import render
from tests.contract.write_values_keys import CHART_VERSIONS


def test_the_committed_image_table_is_what_the_upstream_charts_generate_now(upstream: Path) -> None:
    assert DATA_FILE.read_text(encoding="utf-8") == render(upstream), (
        "knowledge/data/gpu_operator_images.json is stale: run "
        "GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_images"
    )


def test_every_pinned_chart_names_its_driver_toolkit_plugin_and_nfd_images() -> None:
    for chart in CHART_VERSIONS:
        table = default_images(chart)
        assert table is not None
        assert {"operator", "driver", "toolkit", "devicePlugin", "validator"} <= set(table["sections"])
        assert table["nfd"]["repository"].startswith("registry.k8s.io/") and table["nfd"]["tag"].startswith("v")
