"""Reading `gpu-pool:*` from the Pulumi config and validating all of it before anything is registered."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from config.base import nearest
from config.earlier_file import waived
from config.errors import NAMESPACE, ConfigError, key_path
from config.secret_checks import secret_problems
from config.secrets import SECRET_KEYS, SECRETS, Auth, auth_mode, needed_secrets
from config.stack import StackConfig
from config.stack_yaml import surprising_numbers
from config.validate import stack_keys, validate_stack

# The stack file the config came from, where the offline preview says (it may read one outside the project);
# otherwise Pulumi.<stack>.yaml in the project directory, where the CLI runs the program.
STACK_FILE_ENV = "GPU_POOL_STACK_FILE"


@dataclass(frozen=True)
class Secrets:
    """The secrets the stack sets (config/secrets.py's rows, by key), only ever as secret Outputs. A required one
    is always here: load_config refuses a stack without it."""

    values: Mapping[str, pulumi.Output[str]]

    def get(self, key: str) -> pulumi.Output[str] | None:
        return self.values.get(key)

    def require(self, key: str) -> pulumi.Output[str]:
        value = self.values.get(key)
        if value is None:
            raise KeyError(f"{NAMESPACE}:{key} is not set (load_config refuses a stack without a required secret)")
        return value


@dataclass(frozen=True)
class LoadedConfig:
    stack: StackConfig
    secrets: Secrets


def _stack_file() -> Path | None:
    named = os.environ.get(STACK_FILE_ENV)
    path = Path(named) if named else Path.cwd() / f"Pulumi.{pulumi.get_stack()}.yaml"
    return path if path.is_file() else None


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


def _stack_file_problems(raw: Mapping[str, Any]) -> list[str]:
    path = _stack_file()
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    return number_problems(text, raw)


def _misplaced(full_key: str, keys: list[str]) -> str | None:
    """A config key meant for this project but written with a misspelt `gpu-pool:` prefix. (The CLI gives a key
    written without a prefix this project's, so the program never sees one: offline.runner.namespaced.)"""
    namespace, colon, key = full_key.partition(":")
    if not colon:
        return None
    if namespace != NAMESPACE and key in keys and nearest(namespace, [NAMESPACE]) == NAMESPACE:
        return f"{full_key}: '{namespace}' is not this project's prefix; write it as {NAMESPACE}:{key}"
    return None


def _raw_config() -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Non-secret keys (parsed), secret keys (as strings), and keys that lack the `gpu-pool:` prefix."""
    raw: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    misplaced: list[str] = []
    keys = stack_keys() + list(SECRET_KEYS)
    for full_key, value in pulumi.runtime.config.CONFIG.get().items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            problem = _misplaced(full_key, keys)
            if problem:
                misplaced.append(problem)
            continue
        if key in SECRET_KEYS:
            secrets[key] = str(value)
            continue
        try:
            raw[key] = json.loads(value)
        except (TypeError, ValueError):
            raw[key] = value
    return raw, secrets, misplaced


def _missing_secret(key: str, why: str) -> str:
    return f"{NAMESPACE}:{key}: secret not set ({why}); run: pulumi config set --secret {NAMESPACE}:{key} <value>"


def _auth(raw: Mapping[str, Any], stack: StackConfig | None) -> Auth:
    return stack.proxmox.auth if stack is not None else auth_mode(raw.get("proxmox"))


def load_config() -> LoadedConfig:
    """Load and validate the whole stack config and its secrets; raises ConfigError listing every problem."""
    raw, secret_values, problems = _raw_config()
    problems += _stack_file_problems(raw)
    stack: StackConfig | None = None
    try:
        stack = validate_stack(raw)
    except ConfigError as error:
        problems += error.messages
    secret_keys = {key for key in (f"{NAMESPACE}:{short}" for short in SECRET_KEYS) if _is_secret(key)}
    problems += [problem for problem in secret_problems(secret_values, secret_keys) if not waived(problem)]
    problems += [
        _missing_secret(secret.key, secret.purpose)
        for secret in needed_secrets(_auth(raw, stack))
        if secret.key not in secret_values
    ]
    if problems or stack is None:
        raise ConfigError(problems)
    config = pulumi.Config(NAMESPACE)
    values = {secret.key: config.get_secret(secret.key) for secret in SECRETS}
    return LoadedConfig(
        stack=stack, secrets=Secrets({key: value for key, value in values.items() if value is not None})
    )


def _is_secret(full_key: str) -> bool:
    return bool(pulumi.runtime.config.is_config_secret(full_key))
