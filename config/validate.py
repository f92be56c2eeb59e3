"""Validate a stack's `gpu-pool:` keys into a StackConfig, every problem of a run at once. Pure: the day-2 command
and the offline tools validate stack files without loading a Pulumi SDK (config/loader.py reads the keys from
the engine)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from config.base import nearest
from config.cross_key import StackParts, cross_key_problems, parts_from_raw, parts_of
from config.earlier_file import waived
from config.errors import NAMESPACE, ConfigError, format_validation_error
from config.rendered_checks import rendered_problems
from config.secrets import SECRET_KEYS
from config.stack import StackConfig


def stack_keys() -> list[str]:
    return [field.alias or name for name, field in StackConfig.model_fields.items()]


def _dedupe(messages: list[str]) -> list[str]:
    return list(dict.fromkeys(messages))


def validate_stack(raw: Mapping[str, Any]) -> StackConfig:
    """Validate a `{key: value}` mapping of the stack's non-secret keys. Raises ConfigError with every problem:
    single-key mistakes and the cross-key rules on whatever parses, in one run."""
    valid = stack_keys() + list(SECRET_KEYS)
    unknown = [
        f"{NAMESPACE}:{key}: unknown config key"
        + (f"; did you mean '{NAMESPACE}:{hint}'?" if (hint := nearest(key, valid)) else "")
        for key in raw
        if key not in valid
    ]
    known = {k: v for k, v in raw.items() if k in valid and k not in SECRET_KEYS}
    try:
        stack = StackConfig.model_validate(known)
    except ValidationError as error:
        messages = format_validation_error(error, raw=known, model=StackConfig)
        parts = parts_from_raw(known)
        raise ConfigError(_dedupe(unknown + messages + cross_key_problems(parts) + _rendered(parts))) from None
    parts = parts_of(stack)
    problems = unknown + cross_key_problems(parts) + _rendered(parts)
    if problems:
        raise ConfigError(_dedupe(problems))
    return stack


def _rendered(parts: StackParts) -> list[str]:
    """The rendered plan's rules (config/rendered_checks.py: registered by the components, which render the plan);
    on an earlier stack file (make diff) they are waived like the other rules that guard the next `up`."""
    return [problem for problem in rendered_problems(parts) if not waived(problem)]
