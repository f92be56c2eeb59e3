"""Write knowledge/data/clusterpolicy_schema.json from the upstream gpu-operator charts
(knowledge/clusterpolicy_schema.py says what it holds).

GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_clusterpolicy_schema
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from knowledge.clusterpolicy_schema import DATA_FILE, crd_spec_schema, values_to_spec, written_only_when_set
from tests.contract.write_values_keys import CHART_VERSIONS


def _default(values: object, path: str) -> object:
    for part in path.split("."):
        if not isinstance(values, dict):
            return None
        values = values.get(part)
    return values


def render(upstream: Path) -> str:
    """One line per chart version: a chart's change reads as that line's diff."""
    lines = []
    for version in CHART_VERSIONS:
        chart = upstream / "gpu-operator" / version / "chart"
        crd = yaml.safe_load((chart / "crds" / "nvidia.com_clusterpolicies.yaml").read_text(encoding="utf-8"))
        template = (chart / "templates" / "clusterpolicy.yaml").read_text(encoding="utf-8")
        table = values_to_spec(template)
        defaults = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
        dropped = [path for path in written_only_when_set(template) if _default(defaults, path) is True]
        entry = {
            "values_to_spec": {k: list(v) for k, v in table.items()},
            "spec": crd_spec_schema(crd),
            "dropped_when_false": dropped,
        }
        lines.append(json.dumps(version) + ":" + json.dumps(entry, sort_keys=True, separators=(",", ":")))
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> int:
    upstream = os.environ.get("GPU_POOL_UPSTREAM_DIR")
    if not upstream:
        sys.stderr.write("set GPU_POOL_UPSTREAM_DIR to ../shared/upstream\n")
        return 2
    DATA_FILE.write_text(render(Path(upstream)), encoding="utf-8")
    sys.stdout.write(f"wrote {DATA_FILE}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
