"""The fix for a type mix-up in a stack file: what to write instead, in YAML, for the key that was wrong.

YAML turns `driverVersion: 570.211` into a number and `a1000-x4: 4` into a scalar where a map is expected;
pydantic's wording ("Input should be a valid dictionary") names neither the cause nor the fix.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def unwrap_annotation(annotation: Any) -> tuple[Any, bool]:
    """`Annotated[X, ...]` -> X, `X | None` -> X; and whether None was one of the options."""
    optional = False
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
            optional = optional or len(options) < len(get_args(annotation))
            if len(options) != 1:
                return annotation, optional
            annotation = options[0]
        else:
            return annotation, optional


def _unwrap(annotation: Any) -> Any:
    return unwrap_annotation(annotation)[0]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _alias_field(model: type[BaseModel], alias: str) -> Any:
    for name, field in model.model_fields.items():
        if (field.alias or name) == alias:
            return field.annotation
    return None


def annotation_at(model: type[BaseModel], loc: Sequence[int | str]) -> Any:
    """The declared type of the value at `loc` (aliases, list indices, dict keys), or None if it cannot be told."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        origin = get_origin(current)
        if _is_model(current) and isinstance(part, str):
            current = _alias_field(current, part)
        elif origin in (list, tuple, Sequence) and isinstance(part, int):
            current = get_args(current)[0]
        elif origin is dict:
            current = get_args(current)[1]
        else:
            return None
        if current is None:
            return None
    return _unwrap(current)


def field_at(model: type[BaseModel], loc: Sequence[int | str]) -> FieldInfo | None:
    """The model field the value at `loc` is, when `loc` ends at one (its default and bounds give examples)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    parent = annotation_at(model, loc[:-1]) if len(loc) > 1 else model
    if not _is_model(parent):
        return None
    return next((f for n, f in parent.model_fields.items() if (f.alias or n) == loc[-1]), None)


def _number_example(field: FieldInfo | None, fallback: int | float) -> int | float:
    """An example the field itself accepts: its default, else its lower bound, else the fallback."""
    if field is None:
        return fallback
    if isinstance(field.default, int | float) and not isinstance(field.default, bool):
        return field.default
    for bound in field.metadata:
        if getattr(bound, "ge", None) is not None:
            return bound.ge  # type: ignore[no-any-return]
        if getattr(bound, "gt", None) is not None:
            return bound.gt + 1  # type: ignore[no-any-return]
    return fallback


def _map_example(model: type[BaseModel], got: Any) -> str:
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    required = [key for key, field in fields.items() if field.is_required()]
    if got is not None and not isinstance(got, dict | list):
        # `network: dhcp` meant the key whose value dhcp can be, not the first key of the map.
        same = [key for key, field in fields.items() if not field.is_required() and field.default == got]
        if len(same) == 1:
            return f"{{{same[0]}: {got}}}"
        if len(required) == 1:
            return f"{{{required[0]}: {got}}}"
    return "{" + ", ".join(f"{key}: ..." for key in (required or list(fields)[:2])) + "}"


# What each type mix-up expected, in the user's words rather than pydantic's ("Input should be a valid ...").
EXPECTED: dict[str, str] = {
    "string_type": "expects text",
    "dict_type": "expects a map of keys",
    "model_type": "expects a map of keys",
    "model_attributes_type": "expects a map of keys",
    "list_type": "expects a list",
    "int_type": "expects a whole number",
    "int_parsing": "expects a whole number",
    "int_from_float": "expects a whole number",
    "bool_type": "expects true or false",
    "bool_parsing": "expects true or false",
    "float_type": "expects a number",
    "float_parsing": "expects a number",
}


def hint_for(model: type[BaseModel], loc: Sequence[int | str], kind: str, got: Any) -> str | None:
    expected = annotation_at(model, loc)
    field = next((str(part) for part in reversed(loc) if isinstance(part, str)), "the key")
    if kind == "string_type" and isinstance(got, int | float | bool):
        written = str(got).lower() if isinstance(got, bool) else str(got)
        return f'YAML read a {type(got).__name__}: quote it, {field}: "{written}"'
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        if _is_model(expected):
            return f"write a map of keys under it, e.g. {field}: {_map_example(expected, got)}"
        return f"write a map of keys under it, e.g. {field}: {{key: value}}"
    if kind == "list_type":
        item = _unwrap(get_args(expected)[0]) if get_origin(expected) is list and get_args(expected) else None
        if item is not None and _is_model(item) and "name" in {f.alias or n for n, f in item.model_fields.items()}:
            return f"write a list of `- name: ...` entries under {field}"
        return f"write a list under {field}, one `- item` per line"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"write a whole number without quotes, e.g. {field}: {_number_example(field_at(model, loc), 8)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"write true or false without quotes, e.g. {field}: true"
    if kind in ("float_type", "float_parsing"):
        return f"write a number without quotes, e.g. {field}: {_number_example(field_at(model, loc), 0.95)}"
    return None
