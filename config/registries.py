"""`gpu-pool:registryMirrors` and the secret `gpu-pool:registryAuth`: RKE2's registries.yaml as a lab writes it
(RKE2 docs, "Private Registry Configuration": `mirrors.<registry>.{endpoint, rewrite}`, `configs.<host>.{auth, tls}`).

containerd keys a mirror by the registry an image names, so Docker Hub is `docker.io` (its API hosts
`registry-1.docker.io` and `index.docker.io` are taken to it, with a note). wharfie, which pulls RKE2's own runtime
image at boot, reads TLS only from `configs.<host>.tls` and uses the first endpoint of a mirror (DESIGN.md 9).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator

from config.base import ConfigModel
from config.trust import looks_like_pem, pem_certificates

DOCKER_HUB = "docker.io"
# The hosts of Docker Hub's API and index: an image never names them, so a mirror keyed by one is never used.
DOCKER_HUB_ALIASES = ("registry-1.docker.io", "index.docker.io")
# A registry as containerd names it: a host with an optional port, or `*` for every registry (RKE2's
# registries.yaml, "Mirrors": the default endpoint for any registry without a mirror of its own).
_REGISTRY = re.compile(r"^(\*|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]+)?)$")
# What RKE2's registries.yaml takes under `configs.<host>.auth` and `configs.<host>.tls`.
REGISTRY_AUTH_FIELDS = ("username", "password", "auth", "identity_token")
TLS_FILE_FIELDS = ("ca_file", "cert_file", "key_file")
TLS_FIELDS = (*TLS_FILE_FIELDS, "insecure_skip_verify")
AUTH_EXAMPLE = '{"harbor.lab.internal": {"auth": {"username": "robot", "password": "..."}}}'


class RegistryMirrorConfig(ConfigModel):
    """One registry's mirror: its endpoints, in the order containerd tries them, and the rewrites of the image name
    (a Harbor project: `{"^(.*)$": "dockerhub/$1"}`)."""

    endpoint: list[str] = Field(min_length=1, description="the mirror's endpoints, e.g. [https://harbor.lab.internal]")
    rewrite: dict[str, str] = Field(
        default_factory=dict,
        description="regular expression -> replacement applied to the image's name before the pull from these "
        'endpoints, e.g. {"^(.*)$": "dockerhub/$1"} for a Harbor proxy-cache project named dockerhub',
    )

    @field_validator("rewrite")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"{pattern!r} is not a regular expression ({error})") from None
        return value


def canonical_registry(name: str) -> str:
    """Docker Hub's API hosts are the registry `docker.io` to containerd."""
    return DOCKER_HUB if name.lower() in DOCKER_HUB_ALIASES else name


def _endpoint_problem(registry: str, endpoint: str) -> str | None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"{registry}: {endpoint!r} is not an endpoint URL: write https://<host>[:port], as RKE2's registries.yaml "
            "takes it"
        )
    if parts.query or parts.fragment:
        return f"{registry}: {endpoint!r} has a query or fragment, which containerd never sends"
    return None


def registry_mirrors(value: Mapping[str, Any]) -> dict[str, RegistryMirrorConfig]:
    """`gpu-pool:registryMirrors`: registry -> its mirror (a list of endpoints, or {endpoint, rewrite})."""
    mirrors: dict[str, RegistryMirrorConfig] = {}
    for registry, entry in value.items():
        if not isinstance(registry, str) or not _REGISTRY.match(registry):
            raise ValueError(
                f"{registry!r} is not a registry name: a host with an optional port as images name it (docker.io, "
                "nvcr.io, registry.lab:5000), or * for every registry"
            )
        name = canonical_registry(registry)
        if name in mirrors:
            raise ValueError(f"{registry}: is Docker Hub, already given as {name}: list its endpoints once")
        if isinstance(entry, list):
            entry = {"endpoint": entry}
        if isinstance(entry, RegistryMirrorConfig):
            mirror = entry
        else:
            if not isinstance(entry, Mapping) or not entry.get("endpoint"):
                raise ValueError(
                    f"{registry}: give at least one endpoint, e.g. [https://mirror.lab.internal:5000] or "
                    "{endpoint: [https://harbor.lab.internal], rewrite: {'^(.*)$': 'dockerhub/$1'}}"
                )
            try:
                mirror = RegistryMirrorConfig.model_validate(entry)
            except ValidationError as error:
                first = error.errors(include_url=False)[0]
                where = ".".join(str(part) for part in first["loc"])
                message = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"{registry}.{where}: {message}") from None
        for endpoint in mirror.endpoint:
            problem = _endpoint_problem(registry, endpoint)
            if problem:
                raise ValueError(problem)
        mirrors[name] = mirror
    return mirrors


def mirror_endpoints(mirrors: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """registry -> endpoints, whether given as a list or a RegistryMirrorConfig."""
    return {
        registry: list(entry.endpoint if isinstance(entry, RegistryMirrorConfig) else entry)
        for registry, entry in (mirrors or {}).items()
    }


def mirror_notes(raw: Any) -> list[str]:
    """What the validator normalized: a Docker Hub API host taken as `docker.io`."""
    if not isinstance(raw, Mapping):
        return []
    return [
        f"gpu-pool:registryMirrors.{registry}: containerd keys a mirror by the registry an image names, and Docker "
        f"Hub's images name {DOCKER_HUB}: written as {DOCKER_HUB} (rename the key to silence this)"
        for registry in raw
        if isinstance(registry, str) and registry.lower() in DOCKER_HUB_ALIASES
    ]


def endpoint_path_warnings(mirrors: Mapping[str, RegistryMirrorConfig]) -> list[str]:
    """An endpoint with a path: RKE2 then sends `<path>/v2/...` (containerd's override_path). Harbor, the usual lab
    registry, serves /v2/ at its root and takes a project as the first part of the image's name, which is what a
    rewrite does; a registry that does serve a path prefix (Artifactory, Nexus) is fine."""
    warnings = []
    for registry, mirror in mirrors.items():
        for endpoint in mirror.endpoint:
            parts = urlsplit(endpoint)
            path = parts.path.strip("/")
            if not path or path == "v2" or mirror.rewrite:
                continue
            project = path.rsplit("/", 1)[-1]
            warnings.append(
                f"gpu-pool:registryMirrors.{registry}: {endpoint} has a path, so containerd pulls from "
                f"{parts.scheme}://{parts.netloc}/{path}/v2/...; a Harbor project is not such a path (Harbor serves "
                f"/v2/ at its root): write {{endpoint: [{parts.scheme}://{parts.netloc}], rewrite: "
                f'{{"^(.*)$": "{project}/$1"}}}} (registries.yaml rewrite); keep the path only for a registry that '
                "serves one (Artifactory, Nexus)"
            )
    return warnings


def _tls_file_problem(host: str, name: str, value: Any) -> str | None:
    where = f"{host}.tls.{name}"
    if not isinstance(value, str) or not value:
        return f"{where}: give a path on the VM or the PEM text"
    if looks_like_pem(value):
        if name == "key_file":
            if "PRIVATE KEY-----" not in value:
                return f"{where}: is not a PEM private key (-----BEGIN ... PRIVATE KEY-----)"
            return None
        try:
            pem_certificates(value)
        except ValueError as error:
            return f"{where}: {error}"
        return None
    if not value.startswith("/"):
        return f"{where}: a file on the VM is an absolute path (or give the PEM text, which the stack writes)"
    return None


def _tls_problem(host: str, tls: Any) -> str | None:
    if not isinstance(tls, Mapping) or not tls:
        return f"{host}.tls: takes {', '.join(TLS_FIELDS)}"
    unknown = sorted(set(tls) - set(TLS_FIELDS))
    if unknown:
        return f"{host}.tls: takes {', '.join(TLS_FIELDS)}, not {', '.join(unknown)}"
    if ("cert_file" in tls) != ("key_file" in tls):
        return f"{host}.tls: give cert_file and key_file together (the client certificate and its key)"
    if "insecure_skip_verify" in tls and not isinstance(tls["insecure_skip_verify"], bool):
        return f"{host}.tls.insecure_skip_verify: is true or false"
    for name in TLS_FILE_FIELDS:
        if name in tls and (problem := _tls_file_problem(host, name, tls[name])):
            return problem
    return None


def _auth_problem(host: str, auth: Any) -> str | None:
    if not isinstance(auth, Mapping):
        return f"{host}.auth: takes non-empty strings of {', '.join(REGISTRY_AUTH_FIELDS)}"
    unknown = sorted(set(auth) - set(REGISTRY_AUTH_FIELDS))
    if unknown or not auth or not all(isinstance(v, str) and v for v in auth.values()):
        return f"{host}.auth: takes non-empty strings of {', '.join(REGISTRY_AUTH_FIELDS)}" + (
            f", not {', '.join(unknown)}" if unknown else ""
        )
    if ("username" in auth) != ("password" in auth):
        return f"{host}.auth: give username and password together"
    return None


def parse_registry_auth(value: str) -> dict[str, dict[str, Any]]:
    """The `configs` mapping of the secret `registryAuth`, checked; ValueError saying what is wrong (never a value).
    The secret is registries.yaml's `configs` as one line of JSON: each host takes `auth` and `tls`."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"has a line break: give the configs mapping as one line of JSON, e.g. {AUTH_EXAMPLE}")
    try:
        configs = json.loads(value)
    except ValueError:
        raise ValueError(
            f"is not JSON: give RKE2's registries.yaml `configs` mapping as one line of JSON, e.g. {AUTH_EXAMPLE}"
        ) from None
    if not isinstance(configs, dict) or not configs:
        raise ValueError(f"is not a JSON object of registry hosts: e.g. {AUTH_EXAMPLE}")
    for host, entry in configs.items():
        if not isinstance(entry, dict) or not entry or not set(entry) <= {"auth", "tls"}:
            raise ValueError(
                f'{host}: give {{"auth": {{...}}}} and/or {{"tls": {{...}}}} (configs.<host> of registries.yaml), '
                f"e.g. {AUTH_EXAMPLE}"
            )
        if "auth" in entry and (problem := _auth_problem(host, entry["auth"])):
            raise ValueError(problem)
        if "tls" in entry and (problem := _tls_problem(host, entry["tls"])):
            raise ValueError(problem)
    return configs


def registry_auth_problem(value: str) -> str | None:
    try:
        parse_registry_auth(value)
    except ValueError as error:
        return str(error)
    return None


def registry_auth_warnings(value: str) -> list[str]:
    """`insecure_skip_verify`: accepted (RKE2 takes it), but it trusts whoever answers for that host."""
    try:
        configs = parse_registry_auth(value)
    except ValueError:
        return []
    return [
        f"gpu-pool:registryAuth: {host}.tls.insecure_skip_verify is true: containerd then pulls from whoever answers "
        "for that host, unverified; give the registry's CA instead (gpu-pool:trustedCa, or tls.ca_file)"
        for host, entry in configs.items()
        if isinstance(entry.get("tls"), Mapping) and entry["tls"].get("insecure_skip_verify") is True
    ]


def registry_auth_secret_texts(value: str) -> list[str]:
    """The texts of the secret that the program writes elsewhere than the value as a whole: each credential and
    each PEM file (a client key above all), so a review file can show a marker in their place."""
    try:
        configs = parse_registry_auth(value)
    except ValueError:
        return []
    texts: list[str] = []
    for entry in configs.values():
        for credential in (entry.get("auth") or {}).values():
            # As written, and as JSON writes it inside registries.yaml's configs.
            texts += [str(credential), json.dumps(str(credential))[1:-1]]
        for key, pem in (entry.get("tls") or {}).items():
            if key in TLS_FILE_FIELDS and looks_like_pem(pem):
                # As written, and base64-encoded as cloud-init's write_files and the files turn carry a file.
                texts += [pem, base64.b64encode(pem.encode()).decode()]
    return [text for text in dict.fromkeys(texts) if text]
