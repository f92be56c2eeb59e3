"""What the gpu-operator chart copies from its values into the ClusterPolicy, and what the ClusterPolicy CRD allows
there, per chart version: so an `extraValues` value is judged at preview by the schema it meets at `up`.

Why: Helm renders any value into `templates/clusterpolicy.yaml`; a repository with a URL scheme, `imagePullSecrets`
given as a string or a field of the wrong type is accepted by Helm and refused only by the API server at `up` (or,
for an image, by every driver pod's pull). The program cannot read ../shared/upstream at run time, so both are a
generated data file (knowledge/data/clusterpolicy_schema.json) per chart version:
- `values_to_spec`: values path -> [spec path, quoted], read off the chart's `templates/clusterpolicy.yaml` (a
  `key: {{ .Values.a.b }}` or `key: {{ toYaml .Values.a.b | nindent N }}` line under `spec:`; `quoted` where the
  template pipes it through `quote`, so the ClusterPolicy gets its text whatever its type);
- `spec`: the CRD's `spec` schema (deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml) with only the
  keywords a value is checked by (descriptions dropped);
- `dropped_when_false`: the values paths the template writes only when true (`{{- if .Values.a.b }}` around the
  `key: {{ .Values.a.b }}` line) whose chart default is true: a `false` there never reaches the ClusterPolicy, the
  field is left out and the operator's default for an absent field decides (sandboxDevicePlugin.enabled).
`python -m tests.contract.write_clusterpolicy_schema` writes it; tests/contract/test_clusterpolicy_schema_contract.py
regenerates it and fails when it is stale, and tests/e2e/test_values_to_spec_contract.py checks the table with
`helm template` on the pinned chart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

DATA_FILE: Final = Path(__file__).with_name("data") / "clusterpolicy_schema.json"

# The OpenAPI keywords a value is checked by; the rest (descriptions, defaults) never refuse one.
KEPT_KEYWORDS: Final = frozenset(
    {
        "type",
        "properties",
        "additionalProperties",
        "items",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
    }
)

_IF_VALUE = re.compile(r"^\s*\{\{-?\s*if\s+\.Values\.([\w.-]+)\s*-?\}\}\s*$")
_KEY_LINE = re.compile(r"^(\s*)([A-Za-z_][\w-]*):(?:\s+(.*))?$")
# The whole value is one `.Values` path, possibly through toYaml, and piped (quote, nindent, default ...).
_VALUE = re.compile(r"^\{\{-?\s*(?:toYaml\s+)?\.Values\.([\w.-]+)(?P<pipe>\s*\|[^}]*)?\s*-?\}\}$")


def compact_schema(node: Any) -> Any:
    """An OpenAPI schema with only KEPT_KEYWORDS, recursively."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in KEPT_KEYWORDS:
            continue
        if key == "properties":
            out[key] = {name: compact_schema(schema) for name, schema in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = compact_schema(value)
        else:
            out[key] = value
    return out


def crd_spec_schema(crd: Mapping[str, Any]) -> Any:
    """The `spec` schema of the ClusterPolicy CRD's served version, compacted."""
    version = next(v for v in crd["spec"]["versions"] if v.get("served", True))
    return compact_schema(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def values_to_spec(template: str) -> dict[str, tuple[str, bool]]:
    """values path -> (spec path, quoted) for every line of templates/clusterpolicy.yaml whose whole value is one
    `.Values` path. Template directives on their own lines ({{- if }}, {{- end }}) do not change the nesting."""
    table: dict[str, tuple[str, bool]] = {}
    stack: list[tuple[int, str]] = []
    for line in template.splitlines():
        match = _KEY_LINE.match(line.rstrip())
        if match is None:
            continue
        indent, key, rest = len(match[1]), match[2], (match[3] or "").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [k for _, k in stack] + [key]
        if not rest:
            stack.append((indent, key))
            continue
        value = _VALUE.match(rest)
        if path[0] == "spec" and len(path) > 1 and value is not None:
            table[value[1]] = (".".join(path[1:]), "quote" in (value["pipe"] or ""))
    return dict(sorted(table.items()))


def written_only_when_set(template: str) -> list[str]:
    """The values paths whose line the template guards with an `if` on that same value: written only when it is
    true (a bool), non-empty or non-zero; a false, empty or zero value leaves the ClusterPolicy's field out."""
    guarded: list[str] = []
    previous = ""
    for line in template.splitlines():
        if not line.strip():
            continue
        condition = _IF_VALUE.match(previous)
        key = _KEY_LINE.match(line.rstrip())
        value = _VALUE.match((key[3] or "").strip()) if key else None
        if condition and value and condition[1] == value[1]:
            guarded.append(value[1])
        previous = line
    return sorted(set(guarded))


@cache
def _data() -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return data


def spec_schema(chart_version: str) -> Mapping[str, Any] | None:
    entry = _data().get(chart_version)
    return entry["spec"] if entry else None


def spec_paths(chart_version: str) -> Mapping[str, tuple[str, bool]]:
    entry = _data().get(chart_version)
    return {path: (spec, quoted) for path, (spec, quoted) in (entry["values_to_spec"] if entry else {}).items()}


def dropped_when_false(chart_version: str) -> tuple[str, ...]:
    """Values paths defaulting to true that the chart writes only when true (`dropped_when_false` above)."""
    entry = _data().get(chart_version)
    return tuple(entry.get("dropped_when_false", ())) if entry else ()


def schema_at(schema: Mapping[str, Any], spec_path: str) -> Mapping[str, Any] | None:
    """The schema of `spec.<spec_path>`; None where the CRD has no such field."""
    node: Mapping[str, Any] | None = schema
    for part in spec_path.split("."):
        if node is None:
            return None
        node = node.get("properties", {}).get(part)
    return node


_TYPE_WORD = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a map",
    "array": "a list",
}


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    return True


def _given(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def schema_problems(schema: Mapping[str, Any], value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(relative path, what is wrong) for each place `value` breaks `schema`, as the API server's structural
    validation would refuse it at `up` (types, enums, patterns, bounds) or prune it (unknown fields of a closed
    object). A null is Helm's way of
    dropping a key, never checked."""
    if value is None or (schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema):
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, int | str) and not isinstance(value, bool)):
            yield path, f"must be an integer or a string, not {_given(value)}"
        return
    kind = schema.get("type")
    if isinstance(kind, str) and not _type_ok(kind, value):
        yield path, f"must be {_TYPE_WORD.get(kind, kind)}, not {_given(value)}"
        return
    if "enum" in schema and value not in schema["enum"]:
        yield path, f"must be one of {', '.join(map(str, schema['enum']))}, not {value!r}"
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield path, f"{value!r} does not match the CRD's pattern {schema['pattern']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield path, f"is longer than {schema['maxLength']} characters"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield path, f"must be at least {schema['minimum']}, not {value}"
        if "maximum" in schema and value > schema["maximum"]:
            yield path, f"must be at most {schema['maximum']}, not {value}"
    if isinstance(value, Mapping):
        properties: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key in properties:
                yield from schema_problems(properties[key], item, where)
            elif isinstance(extra, Mapping):
                yield from schema_problems(extra, item, where)
            elif properties and extra is not True and not schema.get("x-kubernetes-preserve-unknown-fields"):
                # The API server prunes an unknown field: the value is silently not there after `up`.
                yield (
                    where,
                    (
                        f"is not a field of the ClusterPolicy here (it has: {', '.join(sorted(properties))}): the API "
                        "server would drop it"
                    ),
                )
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            yield from schema_problems(schema["items"], item, f"{path}[{index}]")


# An image reference as the container runtime parses it (distribution/reference's grammar: a domain with an
# optional port, lower-case path components, then `:tag` or `@sha256:<64 hex>`).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
IMAGE_REFERENCE: Final = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}}|@sha256:[a-f0-9]{{64}})$"
)


def composed_image(repository: str, image: str, version: str) -> str:
    """The reference the operator pulls (api/nvidia/v1 clusterpolicy_types.go, imagePath): repository/image:version,
    or repository/image@version for a `sha256:` digest; `image` alone when neither repository nor version is set."""
    if not repository and not version:
        return image
    return f"{repository}/{image}{'@' if version.startswith('sha256:') else ':'}{version}"
