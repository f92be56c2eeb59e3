"""Reading `gpu-pool:*` from the Pulumi config and validating all of it before anything is registered."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from config.base import nearest
from config.earlier_file import waived
from config.errors import NAMESPACE, ConfigError
from config.secret_checks import secret_problems
from config.stack import StackConfig
from config.validate import SECRET_KEYS, stack_keys, validate_stack


@dataclass(frozen=True)
class Secrets:
    """Secret config values, only ever as secret Outputs."""

    proxmox_api_token: pulumi.Output[str] | None
    proxmox_root_password: pulumi.Output[str] | None
    rke2_token: pulumi.Output[str]
    # Optional: the key the kernel upgrade logs in to the VMs with (else the ssh-agent).
    ssh_private_key: pulumi.Output[str] | None = None


@dataclass(frozen=True)
class LoadedConfig:
    stack: StackConfig
    secrets: Secrets


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


def _auth(raw: Mapping[str, Any], stack: StackConfig | None) -> str:
    if stack is not None:
        return stack.proxmox.auth
    proxmox = raw.get("proxmox")
    auth = proxmox.get("auth") if isinstance(proxmox, Mapping) else None
    return auth if auth in ("apiToken", "rootPassword") else "apiToken"


def load_config() -> LoadedConfig:
    """Load and validate the whole stack config and its secrets; raises ConfigError listing every problem."""
    raw, secret_values, problems = _raw_config()
    stack: StackConfig | None = None
    try:
        stack = validate_stack(raw)
    except ConfigError as error:
        problems += error.messages
    secret_keys = {key for key in (f"{NAMESPACE}:{short}" for short in SECRET_KEYS) if _is_secret(key)}
    problems += [problem for problem in secret_problems(secret_values, secret_keys) if not waived(problem)]
    auth = _auth(raw, stack)
    if auth == "apiToken" and "proxmoxApiToken" not in secret_values:
        problems.append(_missing_secret("proxmoxApiToken", "the Proxmox API token, user@realm!tokenid=uuid"))
    if auth == "rootPassword" and "proxmoxRootPassword" not in secret_values:
        problems.append(_missing_secret("proxmoxRootPassword", "root@pam's password, for raw PCI passthrough"))
    if "rke2Token" not in secret_values:
        problems.append(_missing_secret("rke2Token", "the RKE2 join token the GPU workers register with"))
    if problems or stack is None:
        raise ConfigError(problems)
    config = pulumi.Config(NAMESPACE)
    rke2_token = config.require_secret("rke2Token")
    return LoadedConfig(
        stack=stack,
        secrets=Secrets(
            config.get_secret("proxmoxApiToken"),
            config.get_secret("proxmoxRootPassword"),
            rke2_token,
            config.get_secret("sshPrivateKey"),
        ),
    )


def _is_secret(full_key: str) -> bool:
    return bool(pulumi.runtime.config.is_config_secret(full_key))
