"""Write knowledge/data/gpu_operator_values_keys.json from ../shared/upstream's gpu-operator charts.

GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_values_keys
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from knowledge.gpu_operator_values import DATA_FILE, NFD_SECTION, Tree, key_tree, merge_trees

CHART_VERSIONS = ("v26.3.2", "v26.7.0")


def chart_tree(chart_dir: Path) -> Tree:
    """The chart's values plus its NFD subchart's, which Helm reads under node-feature-discovery."""
    values = yaml.safe_load((chart_dir / "chart" / "values.yaml").read_text(encoding="utf-8")) or {}
    subchart = chart_dir / "chart" / "charts" / NFD_SECTION / "values.yaml"
    nfd = yaml.safe_load(subchart.read_text(encoding="utf-8")) or {}
    return merge_trees(key_tree(values), {NFD_SECTION: key_tree(nfd, NFD_SECTION)})


def render(upstream: Path) -> str:
    """One line per chart version: a chart's change reads as that line's diff."""
    return one_line_per_version(
        {version: chart_tree(upstream / "gpu-operator" / version) for version in CHART_VERSIONS}
    )


def one_line_per_version(entries: Mapping[str, object]) -> str:
    """A JSON object with one line per chart version: a chart's change reads as that line's diff."""
    lines = [
        json.dumps(version) + ":" + json.dumps(entry, sort_keys=True, separators=(",", ":"))
        for version, entry in entries.items()
    ]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_from_upstream(render_from: Callable[[Path], str], data_file: Path) -> int:
    """The writers' command: render from GPU_POOL_UPSTREAM_DIR into the data file the knowledge module reads."""
    upstream = os.environ.get("GPU_POOL_UPSTREAM_DIR")
    if not upstream:
        sys.stderr.write("set GPU_POOL_UPSTREAM_DIR to ../shared/upstream\n")
        return 2
    data_file.write_text(render_from(Path(upstream)), encoding="utf-8")
    sys.stdout.write(f"wrote {data_file}\n")
    return 0


if __name__ == "__main__":
    sys.exit(write_from_upstream(render, DATA_FILE))
