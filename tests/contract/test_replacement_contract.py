"""knowledge/replacements.py against the providers' Pulumi schemas: the inputs that force a replacement.

`make diff` says replace or update from that table; if it disagreed with the schema, a protected VM could be
replaced during `up` while the diff said "update".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledge.replacements import PROVIDER_FORCE_NEW, REPLACE_ON_CHANGES
from offline.runner import read_stack_file, run_stack

SCHEMAS = {
    "proxmoxve": "pulumi-schemas/proxmoxve/8.3.0/schema.json",
    "command": "pulumi-schemas/command/1.2.1/schema.json",
}


def _load(upstream: Path, package: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((upstream / SCHEMAS[package]).read_text(encoding="utf-8"))
    return data


def _replace_paths(
    schema: dict[str, Any], properties: dict[str, Any], prefix: str = "", seen: frozenset[str] = frozenset()
) -> set[str]:
    """Input paths marked willReplaceOnChanges (proxmoxve) or replaceOnChanges (command), through nested types."""
    found: set[str] = set()
    for name, spec in properties.items():
        path = f"{prefix}{name}"
        if spec.get("willReplaceOnChanges") or spec.get("replaceOnChanges"):
            found.add(path)
            continue
        ref = spec.get("$ref") or (spec.get("items") or {}).get("$ref") or ""
        if ref.startswith("#/types/"):
            type_name = ref[len("#/types/") :]
            if type_name not in seen:
                nested = schema["types"][type_name].get("properties", {})
                found |= _replace_paths(schema, nested, f"{path}.", seen | {type_name})
    return found


def _collapse(paths: set[str]) -> set[str]:
    """`sourceRaw` and `sourceRaw.data` -> `sourceRaw`: a replaced parent covers its children."""
    return {p for p in paths if not any(p.startswith(q + ".") for q in paths)}


@pytest.mark.parametrize("resource_type", sorted(REPLACE_ON_CHANGES))
def test_the_replace_table_matches_the_providers_schema(upstream: Path, resource_type: str) -> None:
    package = resource_type.split(":", 1)[0]
    schema = _load(upstream, package)
    resource = schema["resources"][resource_type]
    assert _collapse(_replace_paths(schema, resource["inputProperties"])) == set(REPLACE_ON_CHANGES[resource_type])


def test_every_proxmox_and_command_type_the_program_registers_is_in_the_table() -> None:
    recording = run_stack("prod", config=read_stack_file("prod"))
    types = {r.type for r in recording.registrations if r.type.split(":", 1)[0] in SCHEMAS}
    assert types <= set(REPLACE_ON_CHANGES), sorted(types - set(REPLACE_ON_CHANGES))


@pytest.mark.parametrize("resource_type", sorted(PROVIDER_FORCE_NEW))
def test_the_inputs_the_provider_replaces_for_in_code_are_real_inputs_the_schema_does_not_mark(
    upstream: Path, resource_type: str
) -> None:
    """vmId and nodeName replace a VM through the provider's CustomizeDiff, which no schema flag shows: the
    table names them, and the input that waives one (migrate) must exist for the waiver to mean anything."""
    schema = _load(upstream, resource_type.split(":", 1)[0])
    inputs = schema["resources"][resource_type]["inputProperties"]
    for path, unless in PROVIDER_FORCE_NEW[resource_type].items():
        assert path in inputs and not inputs[path].get("willReplaceOnChanges"), path
        assert unless is None or inputs[unless]["type"] == "boolean", unless
