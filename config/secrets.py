"""Every secret of a stack, one row each (as pulumi-eks's `amiTypeMetadata` holds one record per AMI type): its key,
what it is, when the program needs it, its shape, where a provider and the offline tools read it, and the placeholder
the offline preview runs with. The loader, the schema export, the offline runner, `gpu-pool repair` and the
providers read this table; a new secret is a new row.

Never a value here: shapes are checked without showing one (config/secret_checks.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from config.registries import registry_auth_problem, registry_auth_secret_texts, registry_auth_warnings

# `gpu-pool:proxmox.auth`: how the program logs in to the Proxmox API, and so which credential it needs.
Auth = Literal["apiToken", "rootPassword"]
AUTH_MODES: tuple[Auth, ...] = get_args(Auth)
DEFAULT_AUTH: Auth = "apiToken"
# Where the offline preview, `make diff` and `gpu-pool repair` read a secret (config/secret_sources.py).
SOURCE_ENV_PREFIX = "GPU_POOL_SECRET_"

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


def _proxmox_token(value: str) -> str | None:
    if PROXMOX_TOKEN.match(value):
        return None
    if "=" not in value:
        return "has no '=<secret>' part: a Proxmox API token is user@realm!tokenid=<uuid secret>"
    return "is not a Proxmox API token: expected user@realm!tokenid=<uuid>, e.g. pulumi@pve!gpu-pool=1b2c...-..."


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


def _registry_auth(value: str) -> str | None:
    """The secret is the `configs` mapping of registries.yaml as one line of JSON (config/registries.py): each host's
    `auth` and `tls`; a `tls` file given as PEM text is written by the stack to a root-only file and named there."""
    return registry_auth_problem(value)


# The placeholders take a digest (hex) of what they stand for: the secret's `secure:` ciphertext when the stack file
# has one, so a rotated secret reads as changed in `make diff` while its value stays unknown (offline/runner.py).
def _token_placeholder(digest: str) -> str:
    return f"offline@pve!placeholder={digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _rke2_placeholder(digest: str) -> str:
    return f"K10{digest}::server:offline-placeholder"


def _key_placeholder(digest: str) -> str:
    body = f"offline-placeholder-{digest[:16]}"
    return f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n"


def _registry_auth_placeholder(digest: str) -> str:
    return json.dumps({"offline-placeholder": {"auth": {"username": "offline", "password": digest[:16]}}})


def generic_placeholder(key: str, digest: str) -> str:
    """Any other secret's placeholder (a `secure:` key that is no row here)."""
    return f"offline-placeholder-{key}-{digest[:8]}"


@dataclass(frozen=True)
class Secret:
    key: str
    # What it is, in every message about it and in the schema ("the RKE2 join token").
    description: str
    # Why the program needs it: the message when a required one is missing.
    purpose: str
    # When it is needed, as docs/config-reference.md says it.
    needed: str
    # The `proxmox.auth` mode whose Proxmox credential it is; None: not a Proxmox credential.
    auth: Auth | None
    # The program refuses a stack without it (under its auth mode, for a credential); the offline preview makes a
    # placeholder for it. An optional one is read only when the stack sets it.
    required: bool
    shape: Callable[[str], str | None]
    # The variable a provider (the Proxmox API calls of the node steps and of `gpu-pool repair`) reads it from.
    provider_env: str | None
    placeholder: Callable[[str], str]
    # A key file ends with a newline: only quotes around it are a wrapping mistake (config/secret_checks.py).
    key_file: bool = False
    # Valid, but said at every preview (never with the value): e.g. a registry whose TLS is not verified.
    warnings: Callable[[str], list[str]] = lambda value: []
    # Parts of the value the program writes apart from the value as a whole (a password, a client key in a file of
    # its own): the offline preview shows the secret's marker in their place too.
    written_parts: Callable[[str], list[str]] = lambda value: []

    @property
    def source_env(self) -> str:
        """`rke2Token` -> `GPU_POOL_SECRET_RKE2TOKEN`: where the offline tools and repair read it."""
        return SOURCE_ENV_PREFIX + self.key.upper()

    def needed_with(self, auth: Auth) -> bool:
        """Whether a stack with this `proxmox.auth` needs it."""
        return self.required and self.auth in (None, auth)


SECRETS: tuple[Secret, ...] = (
    Secret(
        key="proxmoxApiToken",
        description="the Proxmox API token",
        purpose="the Proxmox API token, user@realm!tokenid=uuid",
        needed="with `proxmox.auth: apiToken` (the default); user@realm!tokenid=uuid",
        auth="apiToken",
        required=True,
        shape=_proxmox_token,
        provider_env="PROXMOX_API_TOKEN",
        placeholder=_token_placeholder,
    ),
    Secret(
        key="proxmoxRootPassword",
        description="root@pam's password",
        purpose="root@pam's password, for raw PCI passthrough",
        needed="with `proxmox.auth: rootPassword` (raw PCI ids only)",
        auth="rootPassword",
        required=True,
        shape=_root_password,
        provider_env="PROXMOX_ROOT_PASSWORD",
        placeholder=lambda digest: generic_placeholder("proxmoxRootPassword", digest),
    ),
    Secret(
        key="rke2Token",
        description="the RKE2 join token",
        purpose="the RKE2 join token the GPU workers register with",
        needed="always; the servers' node-token",
        auth=None,
        required=True,
        shape=_rke2_token,
        provider_env=None,
        placeholder=_rke2_placeholder,
    ),
    Secret(
        key="sshPrivateKey",
        description="the SSH key the kernel upgrade logs in with",
        purpose="the SSH key the kernel upgrade logs in with",
        needed="when a domain pins `kernel` and no ssh-agent holds the key",
        auth=None,
        required=False,
        shape=_private_key,
        provider_env=None,
        placeholder=_key_placeholder,
        key_file=True,
    ),
    Secret(
        key="registryAuth",
        description="the registry mirrors' credentials",
        purpose="the credentials RKE2 pulls from the registry mirrors with (registries.yaml `configs`)",
        needed="when a registry mirror asks for a login or a client certificate; one line of JSON: {host: {auth: "
        "{username, password}, tls: {ca_file, cert_file, key_file, insecure_skip_verify}}}",
        auth=None,
        required=False,
        shape=_registry_auth,
        provider_env=None,
        placeholder=_registry_auth_placeholder,
        warnings=registry_auth_warnings,
        written_parts=registry_auth_secret_texts,
    ),
)
BY_KEY: Mapping[str, Secret] = {secret.key: secret for secret in SECRETS}
SECRET_KEYS: tuple[str, ...] = tuple(BY_KEY)


def auth_mode(proxmox: object) -> Auth:
    """The `proxmox.auth` of a raw (possibly invalid) `gpu-pool:proxmox` value; the default when it names none."""
    auth = proxmox.get("auth") if isinstance(proxmox, Mapping) else None
    return next((mode for mode in AUTH_MODES if mode == auth), DEFAULT_AUTH)


def needed_secrets(auth: Auth) -> tuple[Secret, ...]:
    """The secrets a stack with this `proxmox.auth` cannot run without, in the table's order."""
    return tuple(secret for secret in SECRETS if secret.needed_with(auth))


def proxmox_credential(auth: Auth) -> Secret:
    """The secret the Proxmox API is logged in to with, under this `proxmox.auth`."""
    return next(secret for secret in SECRETS if secret.auth == auth)
