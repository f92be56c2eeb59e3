"""The values -> ClusterPolicy table and the CRD schema gpu-pool judges `extraValues` by are the pinned charts',
regenerated from the upstream data; a stale file fails here with the command that rewrites it. (The table is
checked against `helm template` itself in tests/e2e/test_values_to_spec_contract.py.)"""

from __future__ import annotations

from pathlib import Path

import yaml

from knowledge.clusterpolicy_schema import DATA_FILE, crd_spec_schema, schema_at, spec_paths, spec_schema
from tests.contract.write_clusterpolicy_schema import render
from tests.contract.write_values_keys import CHART_VERSIONS


def test_the_committed_table_and_schema_are_what_the_upstream_charts_generate_now(upstream: Path) -> None:
    assert DATA_FILE.read_text(encoding="utf-8") == render(upstream), (
        "knowledge/data/clusterpolicy_schema.json is stale: run "
        "GPU_POOL_UPSTREAM_DIR=../shared/upstream .venv/bin/python -m tests.contract.write_clusterpolicy_schema"
    )


# Both charts' templates write operator.defaultGPUMode (only when set: values.yaml has no such key) into a CRD that
# lacks it. A value there is not judged here (no schema), and the values-key check refuses the key first.
UPSTREAM_GAPS = {"v26.3.2": ["operator.defaultGPUMode"], "v26.7.0": ["operator.defaultGPUMode"]}


def test_every_spec_path_of_the_table_is_a_field_of_its_crd_but_the_known_upstream_gap() -> None:
    for version in CHART_VERSIONS:
        schema = spec_schema(version)
        assert schema is not None
        missing = [spec for spec, _ in spec_paths(version).values() if schema_at(schema, spec) is None]

        assert missing == UPSTREAM_GAPS[version], f"{version}: the chart writes fields its CRD does not have"


def test_the_compact_schema_keeps_every_field_of_the_crd(upstream: Path) -> None:
    crd_file = upstream / "gpu-operator" / "v26.7.0" / "chart" / "crds" / "nvidia.com_clusterpolicies.yaml"
    full = yaml.safe_load(crd_file.read_text(encoding="utf-8"))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def fields(node: object, prefix: str = "") -> set[str]:
        if not isinstance(node, dict):
            return set()
        found = set()
        for name, child in node.get("properties", {}).items():
            found |= {f"{prefix}{name}"} | fields(child, f"{prefix}{name}.")
        return found | fields(node.get("items"), prefix)

    assert fields(crd_spec_schema(yaml.safe_load(crd_file.read_text()))) == fields(full["properties"]["spec"])
