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

from config.plain_credentials import login_problem, with_userinfo

# Standard library only when loaded (config.registries, with pydantic, is imported where a registry value is read):
# node-check on the node and the in-cluster payloads mask the secret flags of this table (config/arguments.py).

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
    from config.registries import registry_auth_problem

    return registry_auth_problem(value)


def _registry_auth_warnings(value: str) -> list[str]:
    from config.registries import registry_auth_warnings

    return registry_auth_warnings(value)


def _registry_auth_parts(value: str) -> list[str]:
    from config.registries import registry_auth_secret_texts

    return registry_auth_secret_texts(value)


def _proxy_auth(value: str) -> str | None:
    problem = login_problem(value)
    return f"{problem}: the proxy's login, e.g. svc-gpu:<password>, without the URL" if problem else None


def _proxy_auth_parts(value: str) -> list[str]:
    """The login as the proxy URLs carry it (percent-encoded) and its password alone."""
    encoded = with_userinfo("http://h", value).removeprefix("http://").removesuffix("@h")
    return [part for part in (encoded, value.partition(":")[2]) if part]


BEARER = "Bearer "


def _prometheus_auth(value: str) -> str | None:
    if value.startswith(BEARER):
        return None if value[len(BEARER) :].strip() else "is 'Bearer ' with no token after it"
    problem = login_problem(value)
    return f"{problem}: basic auth as user:password, or a token as 'Bearer <token>'" if problem else None


def _prometheus_auth_parts(value: str) -> list[str]:
    return [value[len(BEARER) :]] if value.startswith(BEARER) else [value.partition(":")[2]]


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
        warnings=_registry_auth_warnings,
        written_parts=_registry_auth_parts,
    ),
    Secret(
        key="proxyAuth",
        description="the proxy's login",
        purpose="the login (user:password) the proxy in gpu-pool:proxy asks for",
        needed="when the proxy asks for a login; user:password, the URLs in gpu-pool:proxy without it",
        auth=None,
        required=False,
        shape=_proxy_auth,
        provider_env=None,
        placeholder=lambda digest: f"offline:placeholder-{digest[:8]}",
        written_parts=_proxy_auth_parts,
    ),
    Secret(
        key="prometheusAuth",
        description="the reclaim policy's Prometheus login",
        purpose="the login the reclaim policy reads Prometheus with (reclaim.idleNotebooks.prometheusUrl)",
        needed="when that Prometheus asks for one: user:password (basic auth) or 'Bearer <token>'",
        auth=None,
        required=False,
        shape=_prometheus_auth,
        provider_env=None,
        placeholder=lambda digest: f"offline:placeholder-{digest[:8]}",
        written_parts=_prometheus_auth_parts,
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


# --- Every credential, wherever it is given (issue 50; docs/secrets.md is this table in words) -----------------
# The stack's secrets above are one kind; the day-2 tool's flags and the values the stack refuses in plain config
# are the others. The Makefile's echo guard (SECRET_FLAGS), the argument parsers' masking (config/arguments.py) and
# the canary test (tests/test_canaries.py) all read this list: a credential that is not a row here is not protected.
Given = Literal["secret config", "environment", "file", "flag", "created by the stack", "refused"]
# Where a secret of the stack may be in clear: the cloud-init snippet on the Proxmox datastore (root-only on the
# host, the join token's place since the first round) and root-only files on the VM.
ON_THE_DATASTORE = "the VM's cloud-init snippet on the Proxmox datastore (root-only on the host)"
SECRETS_FLAG = "--secret"
PROMETHEUS_PASSWORD_ENV = "GPU_POOL_PROMETHEUS_PASSWORD"
PROMETHEUS_TOKEN_ENV = "GPU_POOL_PROMETHEUS_TOKEN"
STACK_SECRET_ENV = f"{SOURCE_ENV_PREFIX}<KEY>"
STACK_SECRETS_FILE_ENV = "GPU_POOL_SECRETS_FILE"


@dataclass(frozen=True)
class Credential:
    """One credential: what it is, how it is given (`given`, first the way to prefer), the flags and variables that
    carry it, and the only places it may be in clear. `secret`: its row of SECRETS where it is a stack secret;
    `refused`: the plain-config key that is refused when it carries one (the message says the fix, never the
    value)."""

    name: str
    what: str
    given: tuple[Given, ...]
    in_clear: tuple[str, ...]
    secret: str | None = None
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def _stack_secret(key: str, in_clear: tuple[str, ...], refused: tuple[str, ...] = ()) -> Credential:
    secret = BY_KEY[key]
    return Credential(
        name=f"gpu-pool:{key}",
        what=secret.description,
        given=("secret config", "environment", "file", "flag"),
        in_clear=in_clear,
        secret=key,
        flags=(SECRETS_FLAG,),
        env=(secret.source_env, STACK_SECRETS_FILE_ENV),
        refused=refused,
    )


CREDENTIALS: tuple[Credential, ...] = (
    _stack_secret(
        "proxmoxApiToken",
        (
            "the program's requests to the Proxmox API: its provider's settings and the node steps' environment "
            "(PROXMOX_API_TOKEN), both Pulumi secrets",
        ),
    ),
    _stack_secret("proxmoxRootPassword", ("the program's requests to the Proxmox API, as root@pam's login",)),
    _stack_secret("rke2Token", (ON_THE_DATASTORE, "/etc/rancher/rke2/config.yaml on the VM (0600, root)")),
    _stack_secret("sshPrivateKey", ("the engine's memory while the kernel upgrade's SSH session runs",)),
    _stack_secret(
        "registryAuth",
        (
            ON_THE_DATASTORE,
            "/etc/rancher/rke2/registries.yaml on the VM (0600, root)",
            "a tls key_file given as PEM: its own file under /etc/rancher/rke2/ on the VM (0600, root)",
        ),
    ),
    _stack_secret(
        "proxyAuth",
        (
            ON_THE_DATASTORE,
            "/etc/default/rke2-agent and apt's proxy file on the VM (0600, root)",
            "the Kubernetes Secret gpu-pool-driver-proxy in the operator's namespace, which the GPU Operator adds to "
            "the driver container (driver.secretEnv)",
        ),
        refused=("gpu-pool:proxy.http", "gpu-pool:proxy.https"),
    ),
    _stack_secret(
        "prometheusAuth",
        (
            "the Kubernetes Secret gpu-pool-reclaim-prometheus in the policy's namespace, the policy container's "
            "environment (secretKeyRef)",
        ),
        refused=("gpu-pool:reclaim.idleNotebooks.prometheusUrl",),
    ),
    Credential(
        name="the unattended repair's Proxmox token",
        what="the privilege-separated Proxmox token the stack creates for the repair watcher",
        given=("created by the stack",),
        in_clear=(
            "the Kubernetes Secret the watcher reads (gpu-pool:repair.unattended.namespace), a Pulumi secret output",
        ),
    ),
    Credential(
        name="Prometheus' login for gpu-pool claims",
        what="basic auth (user and password) or a bearer token for the Prometheus that claims --prometheus reads",
        given=("environment", "file", "flag"),
        in_clear=("the Authorization header of the tool's requests to that Prometheus",),
        flags=("--prometheus-password", "--prometheus-token"),
        env=(PROMETHEUS_PASSWORD_ENV, PROMETHEUS_TOKEN_ENV),
    ),
    Credential(
        name="a login in an apt mirror's URL",
        what="user:password@ in gpu-pool:aptMirror.uri or securityUri",
        given=("refused",),
        in_clear=(),
        refused=("gpu-pool:aptMirror.uri", "gpu-pool:aptMirror.securityUri"),
    ),
    Credential(
        name="a password in the chart's extra values",
        what="an extraValues leaf named like a password, token or key, or an env value with user:password@",
        given=("refused",),
        in_clear=(),
        refused=("gpu-pool:gpuOperator.extraValues",),
    ),
)
# Every flag whose value is a credential: the parsers mask what follows it, make runs a command carrying one
# without its echo (the Makefile's SECRET_FLAGS, which tests/test_make_secrets.py holds equal to this).
SECRET_FLAGS: tuple[str, ...] = tuple(dict.fromkeys(flag for row in CREDENTIALS for flag in row.flags))
