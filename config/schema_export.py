"""The stack file's JSON Schema and the config reference, generated from the config models (`make docs`).

`python -m config.schema_export docs/` writes docs/stack-config.schema.json (editors validate and complete a
Pulumi.<stack>.yaml against it through its `# yaml-language-server: $schema=` line) and docs/config-reference.md.
A test fails when either differs from what the models say now.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from config.base import ConfigModel
from config.project import PROJECT
from config.secrets import SECRETS
from config.stack import StackConfig
from config.type_hints import unwrap_annotation

NAMESPACE = PROJECT
SCHEMA_FILE = "stack-config.schema.json"
REFERENCE_FILE = "config-reference.md"


def _models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    pending: list[type[BaseModel]] = [ConfigModel]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__.startswith("config."):  # not the ones tests derive
                found[sub.__name__] = sub
            pending.append(sub)
    return found


def _factory_default(field: FieldInfo) -> Any:
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    return value


def _with_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic leaves out defaults made by a factory; an editor's hover should show them too."""
    models = _models()
    for name, definition in schema.get("$defs", {}).items():
        model = models.get(name)
        if model is None:
            continue
        for field_name, field in model.model_fields.items():
            if field.default_factory is not None:
                definition["properties"][field.alias or field_name]["default"] = _factory_default(field)
    for field_name, field in StackConfig.model_fields.items():
        if field.default_factory is not None:
            schema["properties"][field.alias or field_name]["default"] = _factory_default(field)
    return schema


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _drop_titles(value) for key, value in node.items() if key != "title" or isinstance(value, dict)}
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    return node


def stack_file_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) of a whole Pulumi.<stack>.yaml, whose `config` holds the gpu-pool keys."""
    models = _drop_titles(_with_defaults(StackConfig.model_json_schema(by_alias=True)))
    properties = {f"{NAMESPACE}:{key}": value for key, value in models["properties"].items()}
    for secret in SECRETS:
        key = secret.key
        properties[f"{NAMESPACE}:{key}"] = {
            "description": f"{secret.description}: a secret, set with `pulumi config set --secret {NAMESPACE}:{key}`",
            "type": "object",
            "properties": {"secure": {"type": "string"}},
            "required": ["secure"],
            "additionalProperties": False,
        }
    # Secrets are not required here: a stack file has none until `pulumi config set --secret`, and the offline
    # preview takes them from the environment; the program itself refuses a stack without them at `pulumi preview`.
    required = [f"{NAMESPACE}:{key}" for key in models["required"]]
    config = {
        "type": "object",
        "description": "Stack config. gpu-pool's keys are below; other namespaces (providers, pulumi:) are passed on.",
        "properties": properties,
        "required": required,
        "patternProperties": {f"^(?!{NAMESPACE}:)[A-Za-z0-9_.-]+:.+$": {}},
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/gpu-pool/gpu-pool/blob/main/docs/stack-config.schema.json",
        "title": "gpu-pool stack file (Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {
            "config": config,
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {},
        },
        "$defs": models["$defs"],
    }


# --- the reference ------------------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    annotation, optional = unwrap_annotation(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        text = " \\| ".join(f"`{value}`" for value in get_args(annotation))
    elif origin is list:
        text = f"list of {_type_name(get_args(annotation)[0])}"
    elif origin is dict:
        text = f"map of {_type_name(get_args(annotation)[1])}"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        text = "map"
    else:
        text = {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation, "any")
    return f"{text} (optional)" if optional else text


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    value = _factory_default(field) if field.default_factory else field.default
    if value is PydanticUndefined or value is None:
        return "-"
    if isinstance(value, dict) and len(json.dumps(value)) > 40:
        return "see below" if value else "`{}`"
    return f"`{json.dumps(value)}`"


def _rows(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        annotation, _ = unwrap_annotation(field.annotation)
        yield f"`{key}`", _type_name(field.annotation), _default(field), (field.description or "").replace("|", "\\|")
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _rows(annotation, f"{key}.")
        elif origin is list and _is_model(get_args(annotation)[0]):
            yield from _rows(get_args(annotation)[0], f"{key}[].")
        elif origin is dict and _is_model(get_args(annotation)[1]):
            yield from _rows(get_args(annotation)[1], f"{key}.<name>.")


def _is_model(annotation: Any) -> bool:
    annotation, _ = unwrap_annotation(annotation)
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def config_reference() -> str:
    lines = [
        "# Config reference",
        "",
        "<!-- Generated by `make docs` from the config models (config/schema_export.py); do not edit by hand. -->",
        "",
        "Every key of a `Pulumi.<stack>.yaml` under `config:`, with its type, default and meaning. Nested keys are",
        f"written with dots (`{NAMESPACE}:proxmox` then `ssh.username`). Editors check the same rules through",
        "`docs/stack-config.schema.json` (the stack files' first line points at it). Unknown keys are refused with",
        "the nearest valid one, so a typo never passes silently.",
        "",
    ]
    for name, field in StackConfig.model_fields.items():
        key = field.alias or name
        required = "required" if field.is_required() else "optional"
        lines += [f"## {NAMESPACE}:{key}", "", f"{field.description} ({required}).", ""]
        lines += ["| key | type | default | what it is |", "|---|---|---|---|"]
        annotation, _ = unwrap_annotation(field.annotation)
        origin = get_origin(annotation)
        if _is_model(annotation):
            rows = list(_rows(annotation, ""))
        elif origin is list and _is_model(get_args(annotation)[0]):
            rows = list(_rows(get_args(annotation)[0], "[]."))
        elif origin is dict and _is_model(get_args(annotation)[1]):
            rows = list(_rows(get_args(annotation)[1], "<name>."))
        else:
            rows = []
        lines += [f"| {' | '.join(row)} |" for row in rows] + [""]
    lines += [
        "## Secrets",
        "",
        "Set each with `pulumi config set --secret gpu-pool:<key> <value>`; never in the file.",
        "",
    ]
    lines += ["| key | what it is | needed |", "|---|---|---|"]
    lines += [f"| `{NAMESPACE}:{s.key}` | {s.description} | {s.needed} |" for s in SECRETS] + [""]
    return "\n".join(lines)


def generated_files() -> dict[str, str]:
    return {
        SCHEMA_FILE: json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n",
        REFERENCE_FILE: config_reference(),
    }


def main(argv: list[str] | None = None) -> int:
    target = Path((argv or sys.argv[1:] or ["docs"])[0])
    target.mkdir(parents=True, exist_ok=True)
    for name, text in generated_files().items():
        (target / name).write_text(text, encoding="utf-8")
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
