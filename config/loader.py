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
from config.stack import StackConfig
from config.stack_yaml import surprising_numbers
from config.text_file import NotUtf8Error, read_utf8
from config.validate import SECRET_KEYS, stack_keys, validate_stack

# The stack file the config came from, where the offline preview says (it may read one outside the project);
# otherwise Pulumi.<stack>.yaml in the project directory, where the CLI runs the program.
STACK_FILE_ENV = "GPU_POOL_STACK_FILE"


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
        text = read_utf8(path)
    except (OSError, NotUtf8Error):
        # The CLI read the same file before the program ran; what it said about it stands.
        return []
    return number_problems(text, raw)


# The config prefixes of the providers this program uses and of the CLI itself: their keys are theirs.
PROVIDER_NAMESPACES = frozenset({"kubernetes", "proxmoxve", "command", "pulumi"})


def _misplaced(full_key: str, keys: list[str]) -> str | None:
    """A config key meant for this project but written with a misspelt `gpu-pool:` prefix. (The CLI gives a key
    written without a prefix this project's, so the program never sees one: offline.runner.namespaced.)"""
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
    problems += _stack_file_problems(raw)
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
