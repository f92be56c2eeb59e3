"""The values -> ClusterPolicy table gpu-pool judges `extraValues` by (knowledge/clusterpolicy_schema.py) is what
`helm template` of the pinned chart does: a distinct value at each values path of the table lands at its spec path
in the rendered ClusterPolicy, and no other values path of the chart writes there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from knowledge.clusterpolicy_schema import spec_paths
from tests.e2e.chart import CHART_VERSION, helm, package_chart
from tests.e2e.servers import Tools


def _set(values: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = values
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[leaf] = value


def _get(node: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def test_a_value_at_each_values_path_of_the_table_lands_at_its_spec_path(
    e2e_tools: Tools, upstream: Path, tmp_path: Path
) -> None:
    table = spec_paths(CHART_VERSION)
    sentinels = {path: f"gpupool-sentinel-{index}" for index, path in enumerate(table)}
    values: dict[str, Any] = {}
    for path, sentinel in sentinels.items():
        _set(values, path, sentinel)
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    archive = package_chart(e2e_tools, upstream, tmp_path)

    rendered = helm(e2e_tools, tmp_path, "template", "t", str(archive), "--values", str(tmp_path / "values.yaml"))
    [policy] = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "ClusterPolicy"]

    misplaced = {
        path: (spec, _get(policy["spec"], spec))
        for path, (spec, _) in table.items()
        if _get(policy["spec"], spec) != sentinels[path]
    }
    assert misplaced == {}
