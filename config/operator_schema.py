"""`gpuOperator.extraValues` judged by the schema each value meets: the ClusterPolicy CRD at the spec path the
chart copies it to, and the image reference the operator composes from it (knowledge/clusterpolicy_schema.py).

Each problem names the extraValues key as written, the ClusterPolicy field it lands in, and what that field takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledge.clusterpolicy_schema import (
    IMAGE_REFERENCE,
    composed_image,
    dropped_when_false,
    schema_at,
    schema_problems,
    spec_paths,
    spec_schema,
)

KEY = "gpu-pool:gpuOperator.extraValues"
# Stands in for a part of an image the user did not set (the chart's default is a valid one).
_DEFAULT_PART = {"repository": "nvcr.io/nvidia", "image": "image", "version": "1.0.0"}


def _at(values: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _as_quoted(value: Any) -> Any:
    """What `| quote` makes of a value: its text (Go prints booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) or value is None else str(value)


def schema_problems_of(extra: Mapping[str, Any], chart_version: str) -> list[str]:
    schema = spec_schema(chart_version)
    if schema is None or not extra:
        return []
    problems: list[str] = []
    for values_path, (spec_path, quoted) in spec_paths(chart_version).items():
        present, value = _at(extra, values_path)
        field = schema_at(schema, spec_path)
        if not present or field is None:
            continue
        for relative, what in schema_problems(field, _as_quoted(value) if quoted else value):
            suffix = relative if relative.startswith("[") or not relative else f".{relative}"
            problems.append(
                f"{KEY}.{values_path}{suffix}: lands in the ClusterPolicy's spec.{spec_path}{suffix} (chart "
                f"{chart_version}'s CRD), which {what}"
            )
    return problems


def image_problems_of(extra: Mapping[str, Any], chart_version: str) -> list[str]:
    table = spec_paths(chart_version)
    sections = sorted({path.rsplit(".", 1)[0] for path in table if path.endswith(".repository")})
    problems: list[str] = []
    for section in sections:
        given = {}
        for part in ("repository", "image", "version"):
            present, value = _at(extra, f"{section}.{part}")
            if present and value is not None:
                given[part] = value
        if not given or not all(isinstance(v, str) for v in given.values()):
            continue  # nothing set here, or a wrong type the schema check names
        parts = {**_DEFAULT_PART, **given}
        if IMAGE_REFERENCE.match(composed_image(parts["repository"], parts["image"], parts["version"])):
            continue
        shown = {**{part: f"<chart's {part}>" for part in _DEFAULT_PART}, **given}
        reference = composed_image(shown["repository"], shown["image"], shown["version"])
        named = ", ".join(f"{KEY}.{section}.{part}" for part in given)
        repository = str(given.get("repository", ""))
        hint = (
            "a repository is a registry host and path without a URL scheme, e.g. nvcr.io/nvidia"
            if "://" in repository
            else "repository is host[:port]/path in lower case, image a lower-case name, version a tag or "
            "sha256:<digest>"
        )
        problems.append(
            f"{named}: the operator pulls {reference!r} (repository/image:version), which is not an image "
            f"reference: {hint}"
        )
    return problems


def dropped_false_warnings(extra: Mapping[str, Any], chart_version: str) -> list[str]:
    """A `false` the chart drops (it writes the field only when true; knowledge/clusterpolicy_schema.py): valid,
    and the operator's default for the absent field may well be what was meant, but nothing reading the
    ClusterPolicy sees the `false`, so whatever depends on it being there is told here."""
    table = spec_paths(chart_version)
    warnings = []
    for values_path in dropped_when_false(chart_version):
        present, value = _at(extra, values_path)
        if present and value is False:
            spec_path = table[values_path][0] if values_path in table else values_path
            warnings.append(
                f"{KEY}.{values_path}: false never reaches the ClusterPolicy: chart {chart_version} writes "
                f"spec.{spec_path} only when true (templates/clusterpolicy.yaml), so the field is left out and the "
                f"operator's default for an absent field decides; a policy, script or GitOps check that reads "
                f"spec.{spec_path}: false finds nothing there (remove the key, or check for the field's absence)"
            )
    return warnings
