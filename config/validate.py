"""Validate a stack's `gpu-pool:` keys into a StackConfig, every problem of a run at once, and what only the stack
file's text and its other keys show. Pure: the day-2 command and the offline tools validate stack files without
loading a Pulumi SDK (config/loader.py reads the keys from the engine).

The rules on the rendered plan need the components' builders, which config may not import (the layers point
down), so `validate_keys` takes that pass as an argument: no caller can leave it out by accident, and nothing is
registered at import time. The one call every entry point makes is components/stack_check.py's `validate_stack`,
which passes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from config.base import nearest
from config.cross_key import cross_key_problems
from config.earlier_file import waived
from config.errors import NAMESPACE, ConfigError, format_validation_error, key_path
from config.proxy import apt_mirror_notes
from config.registries import mirror_notes
from config.secret_checks import secret_problems
from config.secrets import SECRET_KEYS
from config.stack import StackConfig
from config.stack_parts import StackParts, parts_from_raw, parts_of
from config.stack_yaml import surprising_numbers

# The pass over what a config renders (components/rendered_plan.py's rendered_problems).
RenderedPass = Callable[[StackParts], list[str]]


def stack_keys() -> list[str]:
    return [field.alias or name for name, field in StackConfig.model_fields.items()]


def _dedupe(messages: list[str]) -> list[str]:
    return list(dict.fromkeys(messages))


def validate_keys(raw: Mapping[str, Any], *, rendered: RenderedPass) -> StackConfig:
    """Validate a `{key: value}` mapping of the stack's non-secret keys. Raises ConfigError with every problem:
    single-key mistakes, the cross-key rules and the `rendered` pass on whatever parses, in one run."""
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
        problems = unknown + messages + cross_key_problems(parts) + _rendered(parts, rendered)
        raise ConfigError(_dedupe(problems)) from None
    parts = parts_of(stack)
    problems = unknown + cross_key_problems(parts) + _rendered(parts, rendered)
    if problems:
        raise ConfigError(_dedupe(problems))
    return stack


def _rendered(parts: StackParts, rendered: RenderedPass) -> list[str]:
    """The rendered plan's rules; on an earlier stack file (make diff) they are waived like the other rules that
    guard the next `up`."""
    return [problem for problem in rendered(parts) if not waived(problem)]


def normalization_notes(raw: Mapping[str, Any]) -> list[str]:
    """What the validators took in a normalized form, said once per preview (the value written is not an error,
    but the stack file should say what is used)."""
    return mirror_notes(raw.get("registryMirrors")) + apt_mirror_notes(raw.get("aptMirror"))


def file_problems(raw: Mapping[str, Any], text: str | None, other_keys: Iterable[str]) -> list[str]:
    """What the stack file shows beyond its values: keys of this project written under a misspelt prefix
    (`other_keys`: the config's keys outside `gpu-pool:`), and integers written with a leading zero (`text`)."""
    keys = stack_keys() + list(SECRET_KEYS)
    misplaced = [problem for key in other_keys if (problem := misplaced_key(key, keys))]
    return misplaced + (number_problems(text, raw) if text is not None else [])


def plain_text_secrets(raw: Mapping[str, Any]) -> list[str]:
    """Secrets written in the stack file in plain text: a secret key among the values (the program reads its
    secrets apart, so only a stack file read as a file has one here); waived for an earlier file (make diff)."""
    plain = {key: "" for key in SECRET_KEYS if key in raw and not _secure(raw[key])}
    return [problem for problem in secret_problems(plain, set()) if not waived(problem)]


def _secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


# The config prefixes of the providers this program uses and of the CLI itself: their keys are theirs.
PROVIDER_NAMESPACES = frozenset({"kubernetes", "proxmoxve", "command", "pulumi"})


def misplaced_key(full_key: str, keys: list[str]) -> str | None:
    """A config key meant for this project but written with a misspelt `gpu-pool:` prefix. (The CLI gives a key
    written without a prefix this project's, so the program never sees one: config.stack_file.namespaced.)"""
    namespace, colon, key = full_key.partition(":")
    if not colon:
        return None
    if namespace != NAMESPACE and key in keys and nearest(namespace, [NAMESPACE]) == NAMESPACE:
        return f"{full_key}: '{namespace}' is not this project's prefix; write it as {NAMESPACE}:{key}"
    # One of this project's keys under another project's prefix (copied from another stack file): the CLI hands it
    # to that project, and this program never sees it. The providers' own prefixes hold their own settings.
    if namespace not in PROVIDER_NAMESPACES and namespace != NAMESPACE and key in keys:
        return (
            f"{full_key}: {key} is a key of this project ({NAMESPACE}), under the prefix of another ('{namespace}'), "
            f"so the program never sees it; write it as {NAMESPACE}:{key}"
        )
    return None


def _at(raw: Mapping[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = raw
    for part in path:
        in_list = isinstance(part, int) and isinstance(node, list) and part < len(node)
        in_map = isinstance(part, str) and isinstance(node, Mapping) and part in node
        if not (in_list or in_map):
            return None
        node = node[part]
    return node


def number_problems(text: str, raw: Mapping[str, Any]) -> list[str]:
    """Integers written with a leading zero, which the CLI's YAML reads as another number (03101 is octal 1601).
    Reported only where the config the program got holds that very number, so another file is never blamed."""
    problems: list[str] = []
    for path, written, value in surprising_numbers(text):
        if len(path) < 2 or path[0] != "config":
            continue
        full = str(path[1]) if ":" in str(path[1]) else f"{NAMESPACE}:{path[1]}"
        namespace, _, short = full.partition(":")
        rest = tuple(path[2:])
        if namespace != NAMESPACE or _at(raw, (short, *rest)) != value:
            continue
        digits = written.lstrip("+-").replace("_", "").lstrip("0") or "0"
        how = f"the octal number {value}" if isinstance(value, int) else f"{value} (it is not even an octal number)"
        problems.append(
            f"{key_path((short, *rest), raw)}: written {written}, which YAML reads as {how}: a leading zero makes an "
            f"integer octal for the Pulumi CLI; write {digits}, or quote it if the text is meant"
        )
    return problems
