"""Reading `gpu-pool:*` from the Pulumi config and validating all of it before anything is registered."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pydantic import ValidationError

from config.base import nearest
from config.errors import NAMESPACE, ConfigError, format_validation_error
from config.stack import StackConfig, cross_key_problems

SECRET_KEYS = ("proxmoxApiToken", "proxmoxRootPassword", "rke2Token", "sshPrivateKey")


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


def stack_keys() -> list[str]:
    return [field.alias or name for name, field in StackConfig.model_fields.items()]


def validate_stack(raw: Mapping[str, Any]) -> StackConfig:
    """Validate a `{key: value}` mapping of the stack's non-secret keys. Raises ConfigError with every problem."""
    valid = stack_keys() + list(SECRET_KEYS)
    unknown = [
        f"{NAMESPACE}:{key}: unknown config key"
        + (f"; did you mean '{NAMESPACE}:{hint}'?" if (hint := nearest(key, valid)) else "")
        for key in raw
        if key not in valid
    ]
    try:
        stack = StackConfig.model_validate({k: v for k, v in raw.items() if k in valid and k not in SECRET_KEYS})
    except ValidationError as error:
        raise ConfigError(unknown + format_validation_error(error)) from None
    problems = unknown + cross_key_problems(stack)
    if problems:
        raise ConfigError(problems)
    return stack


def _raw_config() -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for full_key, value in pulumi.runtime.config.CONFIG.get().items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE or key in SECRET_KEYS:
            continue
        try:
            raw[key] = json.loads(value)
        except (TypeError, ValueError):
            raw[key] = value
    return raw


def _missing_secret(key: str, why: str) -> str:
    return f"{NAMESPACE}:{key}: secret not set ({why}); run: pulumi config set --secret {NAMESPACE}:{key} <value>"


def load_config() -> LoadedConfig:
    """Load and validate the whole stack config; raises ConfigError listing every problem."""
    stack = validate_stack(_raw_config())
    config = pulumi.Config(NAMESPACE)
    api_token = config.get_secret("proxmoxApiToken")
    root_password = config.get_secret("proxmoxRootPassword")
    rke2_token = config.get_secret("rke2Token")
    ssh_private_key = config.get_secret("sshPrivateKey")
    problems: list[str] = []
    if stack.proxmox.auth == "apiToken" and api_token is None:
        problems.append(_missing_secret("proxmoxApiToken", "the Proxmox API token, user@realm!tokenid=uuid"))
    if stack.proxmox.auth == "rootPassword" and root_password is None:
        problems.append(_missing_secret("proxmoxRootPassword", "root@pam's password, for raw PCI passthrough"))
    if rke2_token is None:
        problems.append(_missing_secret("rke2Token", "the RKE2 join token the GPU workers register with"))
    if problems or rke2_token is None:
        raise ConfigError(problems)
    return LoadedConfig(stack=stack, secrets=Secrets(api_token, root_password, rke2_token, ssh_private_key))
