"""The secrets' shapes, checked without ever showing a value, and secrets written in plain text refused."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

NAMESPACE = "gpu-pool"
PROXMOX_TOKEN = re.compile(
    r"^[^@\s!=]+@[^@\s!=]+![A-Za-z0-9][A-Za-z0-9._-]*="
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
# The join token's grammar, as RKE2 parses it (k3s pkg/clientaccess/token.go, parseToken, which RKE2's agent runs):
# `K10<CA hash>::<credentials>`, the hash empty or sha256's 64 hex digits (hex.EncodeToString's lower case: any
# other spelling never matches the CA's hash), the credentials a kubeadm bootstrap token `<6>.<16>` (lower-case
# letters and digits, kubeadm's BootstrapTokenRegexp) or `<user>:<password>` with a password. A token without the
# K10 prefix is a short token (the password alone, or a bootstrap token).
K10_PREFIX = "K10"
CA_HASH = re.compile(r"^[0-9a-f]{64}$")
BOOTSTRAP_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
# What a file path looks like, where the token's text belongs: RKE2's `token-file` is another setting.
PATH_STARTS = ("/", "~", "./", "../", "file://")


def _k10_problem(value: str) -> str | None:
    rest = value[len(K10_PREFIX) :]
    ca_hash, separator, credentials = rest.partition("::")
    if not separator:
        ca_hash, credentials = "", rest
    if ca_hash and len(ca_hash) != 64:
        return (
            f"has a CA hash of {len(ca_hash)} characters after K10, where RKE2 takes 64 "
            "('invalid token CA hash length')"
        )
    if ca_hash and not CA_HASH.match(ca_hash):
        return "has a CA hash after K10 that is not 64 lower-case hex digits: it can never match the cluster CA's"
    if BOOTSTRAP_TOKEN.match(credentials):
        return None
    _user, colon, password = credentials.partition(":")
    if not colon or not password:
        return "has no <user>:<password> (or bootstrap token) after K10<hash>:: ('invalid token format')"
    return None


def _proxmox_token(value: str) -> str | None:
    if PROXMOX_TOKEN.match(value):
        return None
    if "=" not in value:
        return "has no '=<secret>' part: a Proxmox API token is user@realm!tokenid=<uuid secret>"
    return "is not a Proxmox API token: expected user@realm!tokenid=<uuid>, e.g. pulumi@pve!gpu-pool=1b2c...-..."


def _rke2_token(value: str) -> str | None:
    if not value.strip():
        return "is empty: give the servers' node-token (/var/lib/rancher/rke2/server/node-token on a server)"
    if any(char.isspace() for char in value):
        return "contains a space or a line break (copied with the file's newline?): set it without them"
    if value.lower().startswith(PATH_STARTS):
        return (
            "is a file path, not the token: give the file's content (on a server: sudo cat "
            "/var/lib/rancher/rke2/server/node-token), which is what RKE2's agent gets as its token"
        )
    if value.startswith(K10_PREFIX):
        problem = _k10_problem(value)
        if problem:
            return f"starts like a full RKE2 token (K10<hash>::<user>:<password>) but {problem}"
    return None


def _root_password(value: str) -> str | None:
    return "is empty" if not value else None


def _private_key(value: str) -> str | None:
    if "-----BEGIN" in value and "PRIVATE KEY-----" in value:
        return None
    return "is not a private key: expected the whole file, from -----BEGIN ... PRIVATE KEY----- to its END line"


SHAPES: Mapping[str, tuple[str, Callable[[str], str | None]]] = {
    "proxmoxApiToken": ("the Proxmox API token", _proxmox_token),
    "proxmoxRootPassword": ("root@pam's password", _root_password),
    "rke2Token": ("the RKE2 join token", _rke2_token),
    "sshPrivateKey": ("the SSH key the kernel upgrade logs in with", _private_key),
}


QUOTES = ('"', "'")


def wrapping_problem(value: str, *, key_file: bool = False) -> str | None:
    """Quotes around a secret, or whitespace at its ends, that a shell would have taken away but a config value or
    a KEY=VALUE file keeps: they become part of the token (the servers refuse the join, the API the token). A
    private key's file ends with a newline; only quotes count there."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in QUOTES:
        kind = "double" if value[0] == QUOTES[0] else "single"
        return f"is wrapped in {kind} quotes, which would be part of the secret: set it without them"
    if not key_file and value != value.strip():
        return (
            "starts or ends with whitespace (a space, a tab or a line break), which would be part of the secret: "
            "set it without"
        )
    return None


def secret_problems(values: Mapping[str, str], secret_keys: set[str]) -> list[str]:
    """`values`: the secret config keys that are set (short name -> value); `secret_keys`: which are secret."""
    problems: list[str] = []
    for key, (what, shape) in SHAPES.items():
        if key not in values:
            continue
        full = f"{NAMESPACE}:{key}"
        if full not in secret_keys:
            problems.append(
                f"{full}: {what} is in the stack file in plain text, where anyone who can read the file or its git "
                f"history has it: remove it from the file and run: pulumi config set --secret {full} <value>"
            )
            continue
        problem = wrapping_problem(values[key], key_file=key == "sshPrivateKey") or shape(values[key])
        if problem:
            problems.append(f"{full}: {what} {problem} (value not shown)")
    return problems
