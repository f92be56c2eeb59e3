"""The key tree of the gpu-operator chart's values, per chart version: which keys `extraValues` may set at every
depth, and below which keys any key is the user's own.

The program cannot read ../shared/upstream at run time, so the tree is a generated data file
(knowledge/data/gpu_operator_values_keys.json), built by `key_tree` from each chart's values.yaml plus its
node-feature-discovery subchart's values.yaml (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml and
charts/node-feature-discovery/values.yaml at the chart's tag). `python -m tests.contract.write_values_keys`
writes it; tests/contract/test_gpu_operator_values_keys_contract.py regenerates it and fails when it is stale.

Why: Helm renders a misspelt key (`driver.rdma.enable`, `dcgmExporter.serviceMonitor.enable`) silently; the
chart's templates never read it, and the feature the user wanted is simply not there after a 30-minute `up`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

# A leaf of the tree: a value the chart reads as a whole (a scalar, or a list Helm replaces as a whole).
VALUE: Final = 0
# A map whose keys are the user's own: the chart passes it through (labels, env, resources, NFD's config...).
FREE: Final = 1
DATA_FILE: Final = Path(__file__).with_name("data") / "gpu_operator_values_keys.json"
NFD_SECTION: Final = "node-feature-discovery"

# Maps the chart copies into a Kubernetes object (or a component's own config) whatever their keys, even where
# values.yaml gives an example entry (operator.annotations carries openshift.io/scc, operator.resources has
# limits and requests): a user key inside them is theirs, not a typo.
FREE_FORM_NAMES: Final = frozenset(
    {
        "affinity",
        "annotations",
        "args",
        "containerSecurityContext",
        "data",
        "env",
        "labels",
        "nodeSelector",
        "podAnnotations",
        "podLabels",
        "podSecurityContext",
        "resources",
        "securityContext",
        "tolerations",
    }
)
# NFD's worker and master read their own config file from these maps (nfd-worker.conf, nfd-master.conf).
FREE_FORM_PATHS: Final = frozenset({f"{NFD_SECTION}.worker.config", f"{NFD_SECTION}.master.config"})

Tree = dict[str, Any]


def key_tree(values: Mapping[str, Any], prefix: str = "") -> Tree:
    """values.yaml as a tree of keys: a section (dict), VALUE, or FREE (an empty or pass-through map, or null)."""
    tree: Tree = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in FREE_FORM_NAMES or path in FREE_FORM_PATHS or value is None or value == {}:
            tree[str(key)] = FREE
        elif isinstance(value, Mapping):
            tree[str(key)] = key_tree(value, path)
        else:
            tree[str(key)] = VALUE
    return tree


def merge_trees(base: Tree, extra: Tree) -> Tree:
    """`extra`'s keys added to `base` (a subchart's values under its section); a section wins over a leaf."""
    merged = dict(base)
    for key, node in extra.items():
        mine = merged.get(key)
        merged[key] = merge_trees(mine, node) if isinstance(mine, dict) and isinstance(node, dict) else node
    return merged


@cache
def _trees() -> Mapping[str, Tree]:
    trees: Mapping[str, Tree] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return trees


def values_tree(chart_version: str) -> Tree | None:
    """The key tree of this chart version; None for a chart gpu-pool has no tree for."""
    return _trees().get(chart_version)


def known_chart_versions() -> tuple[str, ...]:
    return tuple(sorted(_trees()))


def unknown_keys(tree: Tree, values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, list[str]]]:
    """(path, the keys the chart has there) for every key `values` sets that the chart does not read."""
    found: list[tuple[str, list[str]]] = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        node = tree.get(str(key))
        if node is None:
            found.append((path, sorted(tree)))
        elif isinstance(node, dict) and isinstance(value, Mapping):
            found += unknown_keys(node, value, path)
    return found
