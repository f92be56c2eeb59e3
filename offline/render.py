"""What the offline preview writes: plan.json, one YAML file per Kubernetes object, a Mermaid graph, a tree."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from offline.recording import UNKNOWN, Recording, Registration, is_secret, reveal

SECRET_SHOWN = "[secret]"
COMPUTED_SHOWN = "<computed>"


def redact(value: Any, secret_values: Iterable[str] = ()) -> Any:
    """Secret envelopes become "[secret]", unknowns "<computed>"; any known secret text is scrubbed too."""
    values = [v for v in secret_values if v]
    return _redact(value, values)


def _redact(value: Any, secret_values: list[str]) -> Any:
    if is_secret(value):
        return SECRET_SHOWN
    if isinstance(value, dict):
        return {key: _redact(item, secret_values) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item, secret_values) for item in value]
    if value == UNKNOWN:
        return COMPUTED_SHOWN
    if isinstance(value, str) and any(secret in value for secret in secret_values):
        return SECRET_SHOWN
    return value


def short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if urn else ""


def ordered(recording: Recording) -> list[Registration]:
    """Registration order depends on thread scheduling; URN order does not."""
    return sorted(recording.registrations, key=lambda r: r.urn)


def plan(recording: Recording, project: str, stack: str, secret_values: Iterable[str] = ()) -> dict[str, Any]:
    secrets = list(secret_values)
    return {
        "project": project,
        "stack": stack,
        "resources": [resource_entry(r, secrets) for r in ordered(recording)],
        "outputs": redact(recording.stack_outputs, secrets),
    }


def resource_entry(r: Registration, secrets: list[str]) -> dict[str, Any]:
    """One resource of plan.json; resource options only where set, as `pulumi preview --json` shows them."""
    entry: dict[str, Any] = {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "parent": r.parent,
        "dependsOn": r.dependencies,
        "protect": r.protect,
        "inputs": redact(r.inputs, secrets),
    }
    if r.delete_before_replace:
        entry["deleteBeforeReplace"] = True
    if r.ignore_changes:
        entry["ignoreChanges"] = sorted(r.ignore_changes)
    if r.replace_on_changes:
        entry["replaceOnChanges"] = sorted(r.replace_on_changes)
    return entry


def kubernetes_objects(recording: Recording, secret_values: Iterable[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) for every Kubernetes object the stack creates or patches."""
    secrets = list(secret_values)
    objects: list[tuple[str, dict[str, Any]]] = []
    for r in ordered(recording):
        if not r.type.startswith("kubernetes:") or "kind" not in r.inputs:
            continue
        body = redact(r.inputs, secrets)
        metadata = body.get("metadata") or {}
        parts = [body["kind"], metadata.get("namespace"), metadata.get("name") or r.name]
        stem = "-".join(re.sub(r"[^a-z0-9.]+", "-", str(p).lower()).strip("-") for p in parts if p)
        if r.type.endswith("Patch"):
            stem += "-patch"
        objects.append((f"{stem}.yaml", body))
    return objects


def mermaid(recording: Recording) -> str:
    """Components and resources (parent edges solid, dependsOn dotted)."""
    ids: dict[str, str] = {}
    for index, r in enumerate(ordered(recording)):
        ids[r.urn] = f"r{index}"
    lines = ["flowchart LR"]
    for r in ordered(recording):
        label = f"{r.name}<br/><small>{r.type}</small>"
        shape = f'(["{label}"])' if not r.custom else f'["{label}"]'
        lines.append(f"  {ids[r.urn]}{shape}")
    for r in ordered(recording):
        if r.parent in ids:
            lines.append(f"  {ids[r.parent]} --> {ids[r.urn]}")
    for r in ordered(recording):
        for dep in r.dependencies:
            if dep in ids and dep != r.parent:
                lines.append(f"  {ids[dep]} -.-> {ids[r.urn]}")
    return "\n".join(lines) + "\n"


def _summary(inputs: dict[str, Any], limit: int = 6) -> str:
    fields: list[str] = []
    for key in sorted(inputs):
        value = inputs[key]
        if key == "metadata" and isinstance(value, dict):
            value = {k: value[k] for k in ("namespace", "name") if k in value}
        text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
        if "\n" in text:
            text = text.splitlines()[0] + " ..."
        if len(text) > 90:
            text = text[:87] + "..."
        fields.append(f"{key}={text}")
        if len(fields) >= limit:
            break
    return "  ".join(fields)


def tree(recording: Recording, secret_values: Iterable[str] = ()) -> str:
    """The resource tree as a person reads a preview: type, name, key inputs, what it waits for."""
    secrets = list(secret_values)
    regs = ordered(recording)
    children: dict[str, list[Registration]] = {}
    known = {r.urn for r in regs}
    for r in regs:
        parent = r.parent if r.parent in known else ""
        children.setdefault(parent, []).append(r)
    out: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for r in children.get(parent, []):
            pad = "  " * depth
            out.append(f"{pad}+ {r.type}  {r.name}{'  [protect]' if r.protect else ''}")
            summary = _summary(redact(r.inputs, secrets))
            if summary:
                out.append(f"{pad}    {summary}")
            deps = [short(d) for d in r.dependencies if d != r.parent]
            if deps:
                out.append(f"{pad}    dependsOn: {', '.join(deps)}")
            walk(r.urn, depth + 1)

    walk("", 0)
    return "\n".join(out) + "\n"


SNIPPET = "proxmoxve:index/fileLegacy:FileLegacy"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _unmask(text: str, markers: Mapping[str, str]) -> str:
    for value, marker in sorted(markers.items(), key=lambda item: -len(item[0])):
        text = text.replace(value, marker)
    return text


def review_files(recording: Recording, stack: str, markers: Mapping[str, str]) -> dict[str, str]:
    """The documents a user should read before `up`, by relative path: each VM's cloud-init user data (the one
    document that runs on the VM) with every secret replaced by a marker, and the operator's Helm values."""
    files: dict[str, str] = {}
    for r in ordered(recording):
        if r.type == SNIPPET:
            domain = r.name.removesuffix("-cloud-init")
            data = str(reveal(r.inputs.get("sourceRaw", {})).get("data", ""))
            first, _, rest = _unmask(data, markers).partition("\n")
            # `#cloud-config` stays the first line: cloud-init recognises the document by it.
            note = (
                f"# gpu-pool offline preview of stack {stack!r}: the user data {domain}'s VM boots with (first boot "
                "only).\n# Secrets are shown as <secret KEY>; the uploaded snippet holds their values.\n"
            )
            files[f"cloud-init/{domain}.yaml"] = f"{first}\n{note}{rest}"
        elif r.type == RELEASE:
            values = redact(r.inputs.get("values") or {}, list(markers))
            header = (
                f"# gpu-pool offline preview of stack {stack!r}: exactly the values the {r.inputs.get('chart')} "
                f"{r.inputs.get('version')} release gets.\n"
            )
            files["gpu-operator-values.yaml"] = header + yaml.safe_dump(values, sort_keys=True, width=120)
    return files


def write_all(
    recording: Recording,
    out: Path,
    project: str,
    stack: str,
    secret_values: Iterable[str] = (),
    markers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    secrets = list(secret_values)
    out.mkdir(parents=True, exist_ok=True)
    manifests = out / "manifests"
    if manifests.exists():
        for old in manifests.glob("*.yaml"):
            old.unlink()
    manifests.mkdir(exist_ok=True)
    document = plan(recording, project, stack, secrets)
    (out / "plan.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for file_name, body in kubernetes_objects(recording, secrets):
        (manifests / file_name).write_text(yaml.safe_dump(body, sort_keys=True), encoding="utf-8")
    (out / "graph.mmd").write_text(mermaid(recording), encoding="utf-8")
    cloud_init = out / "cloud-init"
    if cloud_init.exists():
        for old in cloud_init.glob("*.yaml"):
            old.unlink()
    for relative, text in review_files(recording, stack, markers or {}).items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return document
