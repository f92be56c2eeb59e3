"""The images each gpu-operator chart version deploys by default, per values section (NVIDIA/gpu-operator
deployments/gpu-operator/values.yaml at the chart's tag: `<section>.{repository, image, version}`, and the
node-feature-discovery subchart's `image.repository` with its appVersion as the tag), and when a section deploys
at all. The air-gap inventory (components/air_gap.py) composes each from the release's final values.

The program cannot read ../shared/upstream at run time, so the table is a generated data file
(knowledge/data/gpu_operator_images.json): `python -m tests.contract.write_images` writes it, and
tests/contract/test_gpu_operator_images_contract.py regenerates it and fails when it is stale.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

DATA_FILE: Final = Path(__file__).with_name("data") / "gpu_operator_images.json"
NFD_SECTION: Final = "node-feature-discovery"
IMAGE_PARTS: Final = ("repository", "image", "version")
# Sections the operator deploys only with another value on (its state manager's conditions): the sandbox
# workloads' operands, the DRA driver of a GPUCluster resource, a sub-image with its parent.
GATES: Final[Mapping[str, str]] = {
    "vfioManager": "sandboxWorkloads.enabled",
    "vfioManager.driverManager": "sandboxWorkloads.enabled",
    "sandboxDevicePlugin": "sandboxWorkloads.enabled",
    "kataSandboxDevicePlugin": "sandboxWorkloads.enabled",
    "kataManager": "sandboxWorkloads.enabled",
    "ccManager": "sandboxWorkloads.enabled",
    "draDriver": "gpuCluster.deployCR",
    "driver.manager": "driver.enabled",
    "vgpuManager.driverManager": "vgpuManager.enabled",
}


def _sections(values: Mapping[str, Any], prefix: str = "") -> dict[str, dict[str, str]]:
    """path -> the image parts a section of values.yaml names (a section with `repository` or `image`)."""
    found: dict[str, dict[str, str]] = {}
    for key, value in values.items():
        if not isinstance(value, Mapping) or key == NFD_SECTION:
            continue
        path = f"{prefix}.{key}" if prefix else str(key)
        if "repository" in value and "image" in value:
            found[path] = {part: str(value.get(part) or "") for part in IMAGE_PARTS}
        found.update(_sections(value, path))
    return found


def value_at(values: Mapping[str, Any] | None, path: str, default: Any = None) -> Any:
    """The value at a dotted path of Helm values, or `default` where a part is missing."""
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def switch_paths(sections: Mapping[str, Any]) -> list[str]:
    """The values that decide whether a section deploys: its own top section's `enabled`, and its gate."""
    paths = {f"{section.split('.')[0]}.enabled" for section in sections} | set(GATES.values()) | {"nfd.enabled"}
    return sorted(paths)


def chart_images(values: Mapping[str, Any], nfd_values: Mapping[str, Any], nfd_app_version: str) -> dict[str, Any]:
    """A chart's entry of the table, from its values.yaml and its NFD subchart's: each section's image parts, the
    NFD image, and the chart's defaults of the switches that decide what deploys."""
    found = nfd_values.get("image")
    image: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    sections = _sections(values)
    switches = {path: value_at(values, path) for path in switch_paths(sections)}
    return {
        "sections": sections,
        "nfd": {"repository": str(image.get("repository") or ""), "tag": str(image.get("tag") or nfd_app_version)},
        "switches": {path: value for path, value in switches.items() if isinstance(value, bool)},
    }


@cache
def _table() -> Mapping[str, Any]:
    table: Mapping[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return table


def default_images(chart_version: str) -> Mapping[str, Any] | None:
    """The chart version's entry (`sections`, `nfd`); None for a chart gpu-pool has no table for."""
    return _table().get(chart_version)


def registry_of(image: str) -> str:
    """The registry an image reference names, as containerd reads it: the first part when it has a dot or a port
    (or is localhost), else Docker Hub."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"
