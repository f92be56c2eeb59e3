"""RKE2's registries.yaml and the files it names, as a VM gets them (RKE2 docs, "Private Registry Configuration").

`mirrors.<registry>.{endpoint, rewrite}` from `gpu-pool:registryMirrors`; `configs.<host>` from the lab CA
(`gpu-pool:trustedCa`: `tls.ca_file` for every https mirror host, since wharfie, which pulls RKE2's runtime image
at boot, reads TLS only from there) merged with the secret `gpu-pool:registryAuth` (`auth`, and `tls` whose
settings win for its host). A `tls` file given as PEM text is written to a root-only file under
/etc/rancher/rke2/gpu-pool-tls/<host>/ and named in its place.

What carries a secret (registries.yaml with credentials, a client key) is a *secret file*: cloud-init writes it from
the secret snippet, and the files turn receives it on the SSH session's standard input (`secret_files_payload`),
never in a command's text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import yaml

from config.registries import TLS_FILE_FIELDS, RegistryMirrorConfig, mirror_endpoints, parse_registry_auth
from config.trust import looks_like_pem

# Where RKE2 reads its registry mirrors at start (it writes containerd's hosts.toml from it).
RKE2_REGISTRIES_FILE = "/etc/rancher/rke2/registries.yaml"
# The lab CA as containerd reads it for each mirror host (registries.yaml tls.ca_file).
RKE2_TRUSTED_CA_FILE = "/etc/rancher/rke2/gpu-pool-trusted-ca.pem"
# registryAuth's own TLS files given as PEM text, one folder per host (root only: a client key).
REGISTRY_TLS_DIR = "/etc/rancher/rke2/gpu-pool-tls"
_FILE_NAMES = {"ca_file": "ca.pem", "cert_file": "client.pem", "key_file": "client.key"}


def _mirror_document(registry: str, mirror: RegistryMirrorConfig | list[str]) -> dict[str, Any]:
    if isinstance(mirror, RegistryMirrorConfig):
        return {"endpoint": list(mirror.endpoint), **({"rewrite": dict(mirror.rewrite)} if mirror.rewrite else {})}
    return {"endpoint": list(mirror)}


def https_mirror_hosts(mirrors: Mapping[str, Any] | None) -> list[str]:
    """host[:port] of every https mirror endpoint, in order: registries.yaml keys `configs` by it."""
    hosts = [
        urlsplit(endpoint).netloc
        for endpoints in mirror_endpoints(mirrors).values()
        for endpoint in endpoints
        if urlsplit(endpoint).scheme == "https"
    ]
    return list(dict.fromkeys(hosts))


def _tls_folder(host: str) -> str:
    return f"{REGISTRY_TLS_DIR}/{host.replace(':', '_')}"


def registry_configs(
    mirrors: Mapping[str, Any] | None, trusted_ca: bool, registry_auth: str | None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """registries.yaml's `configs` and the files its `tls` names that the stack writes (PEM text from the secret)."""
    configs: dict[str, dict[str, Any]] = {}
    if trusted_ca:
        for host in https_mirror_hosts(mirrors):
            configs[host] = {"tls": {"ca_file": RKE2_TRUSTED_CA_FILE}}
    files: list[dict[str, str]] = []
    for host, entry in (parse_registry_auth(registry_auth) if registry_auth else {}).items():
        merged = dict(configs.get(host, {}))
        if "auth" in entry:
            merged["auth"] = dict(entry["auth"])
        if "tls" in entry:
            tls = {**merged.get("tls", {}), **entry["tls"]}
            for field in TLS_FILE_FIELDS:
                value = tls.get(field)
                if isinstance(value, str) and looks_like_pem(value):
                    path = f"{_tls_folder(host)}/{_FILE_NAMES[field]}"
                    files.append({"path": path, "permissions": "0600", "content": value})
                    tls[field] = path
            merged["tls"] = tls
        configs[host] = merged
    return configs, files


def registries_text(mirrors: Mapping[str, Any] | None, configs: Mapping[str, Any]) -> str:
    """registries.yaml's text. `configs` as one line of JSON (JSON is YAML): a credential in it stays one piece of
    text, which the offline preview replaces with the secret's marker."""
    document = {"mirrors": {registry: _mirror_document(registry, m) for registry, m in (mirrors or {}).items()}}
    text = yaml.safe_dump(document, sort_keys=True)
    return text + (f"configs: {json.dumps(configs, sort_keys=True)}\n" if configs else "")


def registry_files(
    mirrors: Mapping[str, Any] | None, trusted_ca: bool, registry_auth: str | None
) -> list[dict[str, str]]:
    """registries.yaml (when there are mirrors, a lab CA for them or credentials) and the TLS files it names."""
    configs, files = registry_configs(mirrors, trusted_ca, registry_auth)
    if not mirrors and not configs:
        return []
    return [{"path": RKE2_REGISTRIES_FILE, "permissions": "0600", "content": registries_text(mirrors, configs)}, *files]


def secret_files_payload(files: list[dict[str, str]]) -> str:
    """The files turn's standard input: one line per file, `<path> <mode> <base64 content>` (the step writes each
    beside its place and renames it; the paths are the stack's own, without spaces)."""
    return "".join(
        f"{file['path']} {file['permissions']} {base64.b64encode(file['content'].encode()).decode()}\n"
        for file in files
    )
