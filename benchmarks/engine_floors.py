"""The two floors the scaled real-engine case measures prod against (issue 42), as registrations a floor program
sends: pure functions of prod's plan at that size, so a test can hold them to what they promise.

- **(a) commands**: as many trivial `command.local.Command` resources (`create: "true"`) as prod registers custom
  resources: what the engine costs per step for the cheapest resource one of prod's plugins has.
- **(b) types**: prod's resource types and counts (components, Kubernetes objects, Proxmox resources, commands),
  each with the minimal inputs its provider accepts, no dependencies, the same three providers: what the engine
  costs for these resources at all. What prod costs above (b) is what the program hands the engine beyond the
  resources themselves: input sizes, dependencies, secrets.

The floor program (`FLOOR_PROGRAM`) reads the list from `floor-resources.json` in its project and registers each
one untyped, the way prod registers its Kubernetes objects (`components/shared/kubernetes_objects.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from offline.critical_path import PROVIDER_PREFIX

FLOOR_FILE = "floor-resources.json"
TRIVIAL_COMMAND = "command:local:Command"
# One registration of a floor: type token, name, inputs (camelCase, as the engine receives them).
Registration = tuple[str, str, dict[str, Any]]

FLOOR_PROGRAM = '''"""A floor of the scaled real-engine bench (benchmarks/engine_floors.py): the three providers
prod uses, with prod's settings, and the registrations in floor-resources.json, untyped, with no dependencies."""
import json
from pathlib import Path

import pulumi
import pulumi_command

from components.shared.providers import build_kubernetes_provider, build_proxmox_provider
from components.stack_check import validate_stack
from config.loader import load_config

loaded = load_config(validate_stack)
providers = {
    "proxmoxve": build_proxmox_provider(loaded),
    "kubernetes": build_kubernetes_provider(loaded),
    "command": pulumi_command.Provider("command"),
}
for type_, name, inputs in json.loads(Path(__file__).with_name("floor-resources.json").read_text()):
    package = type_.split(":", 1)[0]
    if package in providers:
        pulumi.CustomResource(type_, name, inputs, opts=pulumi.ResourceOptions(provider=providers[package]))
    else:
        pulumi.ComponentResource(type_, name)
'''


def _kubernetes_object(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """apiVersion, kind and the object's name (and namespace): what the provider needs to address it."""
    metadata = inputs.get("metadata") or {}
    return {
        "apiVersion": inputs["apiVersion"],
        "kind": inputs["kind"],
        "metadata": {key: metadata[key] for key in ("name", "namespace") if key in metadata},
    }


def _crd(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The API server's required fields (the provider checks `.spec.group`), each version with an open schema."""
    spec = inputs.get("spec") or {}
    open_schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    versions = [
        {"name": v["name"], "served": v.get("served", True), "storage": v.get("storage", False), "schema": open_schema}
        for v in spec.get("versions") or []
    ]
    return {
        **_kubernetes_object(inputs),
        "spec": {"group": spec["group"], "names": spec["names"], "scope": spec["scope"], "versions": versions},
    }


def _helm_release(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The same chart (the provider loads it at Check whatever the inputs), no values."""
    return {key: inputs[key] for key in ("chart", "name", "namespace", "version", "repositoryOpts") if key in inputs}


def _command(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"create": "true"}


def _remote_command(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"connection": {"host": "127.0.0.1"}, "create": "true"}


def _vm(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"nodeName": inputs["nodeName"]}


def _pci_mapping(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": inputs["name"], "maps": inputs["maps"]}


def _file(inputs: Mapping[str, Any]) -> dict[str, Any]:
    raw = inputs.get("sourceRaw") or {}
    return {
        "contentType": inputs["contentType"],
        "datastoreId": inputs["datastoreId"],
        "nodeName": inputs["nodeName"],
        "sourceRaw": {"data": "#\n", "fileName": raw.get("fileName", "user-data.yaml")},
    }


# Per provider package (or exact type token, which wins): the minimal inputs of a resource of that type, from prod's.
MINIMAL_INPUTS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "kubernetes": _kubernetes_object,
    "kubernetes:helm.sh/v3:Release": _helm_release,
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": _crd,
    "command:local:Command": _command,
    "command:remote:Command": _remote_command,
    "proxmoxve:index/vmLegacy:VmLegacy": _vm,
    "proxmoxve:hardware/mapping/pci:Pci": _pci_mapping,
    "proxmoxve:index/fileLegacy:FileLegacy": _file,
}
COMPONENT_PACKAGE = "gpu-pool"


class UnknownType(ValueError):
    pass


def _registered(plan: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in plan.get("resources") or [] if not str(r["type"]).startswith(PROVIDER_PREFIX)]


def types_floor(plan: Mapping[str, Any]) -> list[Registration]:
    """Floor (b): every resource of prod's plan but its providers, same type and name, minimal inputs."""
    floor: list[Registration] = []
    for resource in _registered(plan):
        type_ = str(resource["type"])
        package = type_.split(":", 1)[0]
        if package == COMPONENT_PACKAGE:
            floor.append((type_, str(resource["name"]), {}))
            continue
        minimal = MINIMAL_INPUTS.get(type_) or MINIMAL_INPUTS.get(package)
        if minimal is None:
            raise UnknownType(f"{type_}: no minimal inputs in benchmarks/engine_floors.py MINIMAL_INPUTS; add them")
        floor.append((type_, str(resource["name"]), minimal(resource.get("inputs") or {})))
    return floor


def custom_count(plan: Mapping[str, Any]) -> int:
    return sum(1 for r in _registered(plan) if str(r["type"]).split(":", 1)[0] != COMPONENT_PACKAGE)


def commands_floor(plan: Mapping[str, Any]) -> list[Registration]:
    """Floor (a): as many trivial local commands as prod has custom resources."""
    return [(TRIVIAL_COMMAND, f"trivial-{index}", {"create": "true"}) for index in range(custom_count(plan))]


def input_bytes_by_type(plan: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """type -> (resources, bytes of their inputs as JSON): what the program hands the engine per type."""
    sizes: dict[str, tuple[int, int]] = {}
    for resource in plan.get("resources") or []:
        count, size = sizes.get(resource["type"], (0, 0))
        sizes[resource["type"]] = (count + 1, size + len(json.dumps(resource.get("inputs") or {})))
    return sizes


def dependency_edges(plan: Mapping[str, Any]) -> int:
    """The dependencies the SDK sent with the registrations (plan.json's dependsOn), in all."""
    return sum(len(r.get("dependsOn") or []) for r in plan.get("resources") or [])


def registration_counts(registrations: Sequence[Registration]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for type_, _, _ in registrations:
        counts[type_] = counts.get(type_, 0) + 1
    return counts
