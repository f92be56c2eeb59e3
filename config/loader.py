"""Reading `gpu-pool:*` from the Pulumi config and validating all of it before anything is registered."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pulumi

from config.earlier_file import waived
from config.errors import NAMESPACE, ConfigError
from config.secret_checks import secret_problems
from config.secrets import SECRET_KEYS, SECRETS, Auth, auth_mode, needed_secrets
from config.stack import StackConfig
from config.text_file import NotUtf8Error, read_utf8
from config.validate import normalization_notes

# The stack file the config came from, where the offline preview says (it may read one outside the project);
# otherwise Pulumi.<stack>.yaml in the project directory, where the CLI runs the program.
STACK_FILE_ENV = "GPU_POOL_STACK_FILE"


class StackValidation(Protocol):
    """The one validation of a stack's keys (components/stack_check.validate_stack)."""

    def __call__(
        self, raw: Mapping[str, Any], *, text: str | None = None, other_keys: Iterable[str] = ()
    ) -> StackConfig: ...


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
    # What was accepted but is worth a word: a value taken in a normalized form, a secret's risky setting.
    notes: tuple[str, ...] = ()


def _stack_file() -> Path | None:
    named = os.environ.get(STACK_FILE_ENV)
    path = Path(named) if named else Path.cwd() / f"Pulumi.{pulumi.get_stack()}.yaml"
    return path if path.is_file() else None


def _stack_file_text() -> str | None:
    path = _stack_file()
    if path is None:
        return None
    try:
        return read_utf8(path)
    except (OSError, NotUtf8Error):
        # The CLI read the same file before the program ran; what it said about it stands.
        return None


def _raw_config() -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Non-secret keys (parsed), secret keys (as strings), and the keys outside the `gpu-pool:` namespace."""
    raw: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    others: list[str] = []
    for full_key, value in pulumi.runtime.config.CONFIG.get().items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            others.append(full_key)
            continue
        if key in SECRET_KEYS:
            secrets[key] = str(value)
            continue
        try:
            raw[key] = json.loads(value)
        except (TypeError, ValueError):
            raw[key] = value
    return raw, secrets, others


def _missing_secret(key: str, why: str) -> str:
    return f"{NAMESPACE}:{key}: secret not set ({why}); run: pulumi config set --secret {NAMESPACE}:{key} <value>"


def _auth(raw: Mapping[str, Any], stack: StackConfig | None) -> Auth:
    return stack.proxmox.auth if stack is not None else auth_mode(raw.get("proxmox"))


def load_config(validate: StackValidation) -> LoadedConfig:
    """Load the whole stack config and its secrets, the keys validated by `validate` (the one validation every
    entry point makes, components/stack_check.py); raises ConfigError listing every problem."""
    raw, secret_values, others = _raw_config()
    problems: list[str] = []
    stack: StackConfig | None = None
    try:
        stack = validate(raw, text=_stack_file_text(), other_keys=others)
    except ConfigError as error:
        problems += error.messages
    secret_keys = {key for key in (f"{NAMESPACE}:{short}" for short in SECRET_KEYS) if _is_secret(key)}
    problems += [problem for problem in secret_problems(secret_values, secret_keys) if not waived(problem)]
    problems += [
        _missing_secret(secret.key, secret.purpose)
        for secret in needed_secrets(_auth(raw, stack))
        if secret.key not in secret_values
    ]
    problems += proxy_login_problems(raw.get("proxy"), set(secret_values))
    if problems or stack is None:
        raise ConfigError(problems)
    config = pulumi.Config(NAMESPACE)
    values = {secret.key: config.get_secret(secret.key) for secret in SECRETS}
    notes = (
        normalization_notes(raw)
        + proxy_login_notes(raw.get("proxy"), set(secret_values))
        + [
            note
            for secret in SECRETS
            if secret.key in secret_values
            for note in secret.warnings(secret_values[secret.key])
        ]
    )
    return LoadedConfig(
        stack=stack,
        secrets=Secrets({key: value for key, value in values.items() if value is not None}),
        notes=tuple(notes),
    )


def proxy_login_problems(proxy: object, secrets_set: set[str]) -> list[str]:
    """`proxy.login` and the secret gpu-pool:proxyAuth come together: the one says the VMs and the driver get a
    login (its files and Secret in the plan), the other is the login."""
    login = isinstance(proxy, Mapping) and proxy.get("login") is True
    if login and "proxyAuth" not in secrets_set:
        return [_missing_secret("proxyAuth", "gpu-pool:proxy.login is true: the proxy's login, user:password")]
    return []


def proxy_login_notes(proxy: object, secrets_set: set[str]) -> list[str]:
    """A login set for a proxy that asks for none is read by nothing: said, not refused (an earlier stack file in
    `make diff` is read with the same secrets)."""
    login = isinstance(proxy, Mapping) and proxy.get("login") is True
    if not login and "proxyAuth" in secrets_set:
        return [
            f"{NAMESPACE}:proxyAuth: is set, but gpu-pool:proxy.login is not true, so no VM or driver gets it: set "
            "`login: true` under gpu-pool:proxy (or remove the secret)"
        ]
    return []


def _is_secret(full_key: str) -> bool:
    return bool(pulumi.runtime.config.is_config_secret(full_key))
