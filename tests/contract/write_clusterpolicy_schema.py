"""Write knowledge/data/clusterpolicy_schema.json from the upstream gpu-operator charts
(knowledge/clusterpolicy_schema.py says what it holds).

GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_clusterpolicy_schema
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from knowledge.clusterpolicy_schema import DATA_FILE, crd_spec_schema, values_to_spec, written_only_when_set
from tests.contract.write_values_keys import CHART_VERSIONS, one_line_per_version, write_from_upstream


def render(upstream: Path) -> str:
    """One line per chart version: a chart's change reads as that line's diff."""
    return one_line_per_version(
        {version: chart_entry(upstream / "gpu-operator" / version / "chart") for version in CHART_VERSIONS}
    )


def chart_entry(chart: Path) -> dict[str, object]:
    crd = yaml.safe_load((chart / "crds" / "nvidia.com_clusterpolicies.yaml").read_text(encoding="utf-8"))
    template = (chart / "templates" / "clusterpolicy.yaml").read_text(encoding="utf-8")
    table = values_to_spec(template)
    defaults = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    return {
        "values_to_spec": {k: list(v) for k, v in table.items()},
        "spec": crd_spec_schema(crd),
        "dropped_when_false": [path for path in written_only_when_set(template) if _default(defaults, path) is True],
    }


def _default(values: object, path: str) -> object:
    for part in path.split("."):
        if not isinstance(values, dict):
            return None
        values = values.get(part)
    return values


if __name__ == "__main__":
    sys.exit(write_from_upstream(render, DATA_FILE))
