"""The values -> ClusterPolicy table gpu-pool judges `extraValues` by (knowledge/clusterpolicy_schema.py) is what
`helm template` of the pinned chart does: a distinct value at each values path of the table lands at its spec path
in the rendered ClusterPolicy, and no other values path of the chart writes there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from knowledge.clusterpolicy_schema import dropped_when_false, spec_paths
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


# The preview warns of a false set there (config/operator_schema.dropped_false_warnings): one table, read off the
# template by knowledge/clusterpolicy_schema.py and checked here against helm itself.
WRITTEN_ONLY_WHEN_TRUE = dropped_when_false(CHART_VERSION)


def _sentinel(default: Any, index: int) -> Any:
    """A value no other path has, of the default's own type: the chart's templates compare and range over values
    (`eq .Values.cdi.enabled false`), so a string where a bool or a map is expected stops `helm template` itself.
    A bool cannot be unique: it is the default flipped, each in a render of its own."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return 700000 + index
    if isinstance(default, dict):
        return {**default, f"gpupool-sentinel-{index}": "x"}
    if isinstance(default, list):
        return [*default, f"gpupool-sentinel-{index}"]
    return f"gpupool-sentinel-{index}"


def _render(e2e_tools: Tools, work: Path, archive: Path, values: dict[str, Any]) -> dict[str, Any]:
    (work / "values.yaml").write_text(yaml.safe_dump(values))
    rendered = helm(e2e_tools, work, "template", "t", str(archive), "--values", str(work / "values.yaml"))
    [policy] = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "ClusterPolicy"]
    return dict(policy["spec"])


def test_a_value_at_each_values_path_of_the_table_lands_at_its_spec_path(
    e2e_tools: Tools, upstream: Path, tmp_path: Path
) -> None:
    table = spec_paths(CHART_VERSION)
    defaults = yaml.safe_load((upstream / f"gpu-operator/{CHART_VERSION}/chart/values.yaml").read_text())
    sentinels = {path: _sentinel(_get(defaults, path), index) for index, path in enumerate(table)}
    archive = package_chart(e2e_tools, upstream, tmp_path)
    # Every non-bool path set at once (each value unique); then each bool flipped in a render of its own (the chart
    # validates some pairs, e.g. the NRI plugin needs CDI, so flipping them all at once is refused by helm).
    plain = [path for path, value in sentinels.items() if not isinstance(value, bool)]
    renders = [plain, *([path] for path, value in sentinels.items() if isinstance(value, bool))]
    landed: dict[str, Any] = {}
    for chosen in renders:
        values: dict[str, Any] = {}
        for path in chosen:
            _set(values, path, sentinels[path])
        spec = _render(e2e_tools, tmp_path, archive, values)
        landed |= {path: _get(spec, table[path][0]) for path in chosen}

    assert WRITTEN_ONLY_WHEN_TRUE, "the table of values the chart writes only when true is empty"
    # The chart writes these only when true (templates/clusterpolicy.yaml: `{{- if .Values.sandboxDevicePlugin.enabled
    # }}` around the field), so `false` never reaches the ClusterPolicy and the CRD's default applies: true must land.
    for path in WRITTEN_ONLY_WHEN_TRUE:
        assert landed[path] is None, (
            f"{path}: false is written after all; the template parser (knowledge/clusterpolicy_schema.py) misread it"
        )
        values = {}
        _set(values, path, True)
        landed[path] = sentinels[path] = _get(_render(e2e_tools, tmp_path, archive, values), table[path][0])
        assert landed[path] is True, f"{path}: true did not land at {table[path][0]}"

    misplaced = {
        path: (table[path][0], landed[path], sentinels[path])
        for path in table
        if landed[path] != sentinels[path] and str(landed[path]) != str(sentinels[path])
    }
    assert misplaced == {}
