"""Write knowledge/data/gpu_operator_images.json from ../shared/upstream's gpu-operator charts.

GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_images
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from knowledge.gpu_operator_images import DATA_FILE, NFD_SECTION, chart_images
from tests.contract.write_values_keys import CHART_VERSIONS, one_line_per_version, write_from_upstream


def _chart(chart_dir: Path) -> dict[str, object]:
    values = yaml.safe_load((chart_dir / "chart" / "values.yaml").read_text(encoding="utf-8")) or {}
    subchart = chart_dir / "chart" / "charts" / NFD_SECTION
    nfd = yaml.safe_load((subchart / "values.yaml").read_text(encoding="utf-8")) or {}
    app_version = str(yaml.safe_load((subchart / "Chart.yaml").read_text(encoding="utf-8")).get("appVersion", ""))
    return chart_images(values, nfd, app_version)


def render(upstream: Path) -> str:
    return one_line_per_version({version: _chart(upstream / "gpu-operator" / version) for version in CHART_VERSIONS})


if __name__ == "__main__":
    sys.exit(write_from_upstream(render, DATA_FILE))
