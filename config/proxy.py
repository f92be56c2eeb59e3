"""`gpu-pool:proxy`: the HTTP(S) proxy a lab behind one reaches the internet through (docs/air-gap.md).

Every place that downloads gets it: the RKE2 installer and the agent (`/etc/default/rke2-agent`, RKE2's "Configure
an HTTP proxy": HTTP_PROXY, HTTPS_PROXY, NO_PROXY, plus curl's lower-case names), apt (cloud-config `apt:` proxy
keys), and the GPU Operator's driver container, which downloads the kernel headers it builds against
(`driver.env`, NVIDIA's "GPU Operator in proxy environments"). NO_PROXY always keeps the cluster itself off the
proxy (`no_proxy_for`): a pod or service address sent to the proxy never arrives.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.rke2 import Rke2Config

# The names inside a cluster that never go through a proxy (RKE2's proxy docs list these with the CIDRs).
CLUSTER_NAMES = (".svc", ".cluster.local", "localhost", "127.0.0.1")


def _proxy_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not a proxy URL: write http://<host>:<port>, e.g. http://proxy.lab:3128")
    try:
        port = parts.port
    except ValueError:
        port = None
        raise ValueError(f"{value!r} has a port that is not a number") from None
    if port is None:
        raise ValueError(f"{value!r} names no port: write it, e.g. http://{parts.hostname}:3128")
    if parts.path.strip("/") or parts.query:
        raise ValueError(f"{value!r} has a path: a proxy is http://<host>:<port> alone")
    return value.rstrip("/")


class ProxyConfig(ConfigModel):
    http: str | None = Field(default=None, description="proxy for http:// URLs, e.g. http://proxy.lab:3128")
    https: str | None = Field(
        default=None, description="proxy for https:// URLs (most downloads), e.g. http://proxy.lab:3128"
    )
    no_proxy: list[str] = Field(
        default_factory=list,
        description="hosts, domains (.lab.internal) and CIDRs reached directly, beside the ones gpu-pool always "
        "adds (the cluster and service CIDRs, .svc, .cluster.local, localhost, the domain's subnet, the server)",
    )

    _urls = field_validator("http", "https")(classmethod(lambda cls, v: _proxy_url(v)))

    @field_validator("no_proxy")
    @classmethod
    def _entries(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not entry or any(c.isspace() or c == "," for c in entry):
                raise ValueError(f"{entry!r}: one host, domain or CIDR an entry, without spaces or commas")
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.http or self.https)


def _archive_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{value!r} is not an archive URL: write http://<host>/ubuntu, as an Ubuntu archive mirror serves it "
            "(dists/ and pool/ below it)"
        )
    return value.rstrip("/")


class AptMirrorConfig(ConfigModel):
    """`gpu-pool:aptMirror`: the Ubuntu archive a lab serves itself (docs/air-gap.md): cloud-init's `apt:` primary
    and security sources on every new VM, and the GPU Operator driver container's package sources
    (`driver.repoConfig`, NVIDIA's air-gap guide), where it downloads the kernel headers it builds against."""

    uri: str = Field(description="the archive mirror, e.g. http://apt.lab.internal/ubuntu (archive.ubuntu.com's)")
    security_uri: str | None = Field(
        default=None,
        description="the security archive's mirror (security.ubuntu.com's); default: `uri`, where most mirrors "
        "serve the -security suites too",
    )

    _urls = field_validator("uri", "security_uri")(classmethod(lambda cls, v: _archive_url(v)))

    @property
    def security(self) -> str:
        return self.security_uri or self.uri


def no_proxy_for(proxy: ProxyConfig, cidrs: Sequence[str], subnet: str | None, server_host: str | None) -> str:
    """NO_PROXY, in order, without repeats: the cluster's CIDRs, its names, the VM's subnet, the server, the user's."""
    entries = [*cidrs, *CLUSTER_NAMES, *([subnet] if subnet else []), *([server_host] if server_host else [])]
    entries += proxy.no_proxy
    return ",".join(dict.fromkeys(entries))


# A registry as containerd names it: a host with an optional port, or `*` for every registry (RKE2's
# registries.yaml, "Mirrors": the default endpoint for any registry without a mirror of its own).
_REGISTRY = re.compile(r"^(\*|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]+)?)$")


def registry_mirrors(value: dict[str, list[str]]) -> dict[str, list[str]]:
    """`gpu-pool:registryMirrors`: registry -> its mirror endpoints, in the order containerd tries them."""
    for registry, endpoints in value.items():
        if not _REGISTRY.match(registry):
            raise ValueError(
                f"{registry!r} is not a registry name: a host with an optional port as images name it (docker.io, "
                "nvcr.io, registry.lab:5000), or * for every registry"
            )
        if not endpoints:
            raise ValueError(f"{registry}: give at least one endpoint, e.g. https://mirror.lab.internal:5000")
        for endpoint in endpoints:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"{registry}: {endpoint!r} is not an endpoint URL: write https://<host>[:port], as RKE2's "
                    "registries.yaml takes it"
                )
    return value


def registries_yaml(mirrors: dict[str, list[str]]) -> dict[str, object]:
    """/etc/rancher/rke2/registries.yaml (RKE2 docs, "Private Registry Configuration": mirrors.<registry>.endpoint)."""
    return {"mirrors": {registry: {"endpoint": list(endpoints)} for registry, endpoints in mirrors.items()}}


def proxy_environment(proxy: ProxyConfig | None, rke2: Rke2Config, subnet: str | None = None) -> dict[str, str]:
    """HTTP_PROXY, HTTPS_PROXY, NO_PROXY and curl's lower-case names (curl reads only `http_proxy` in lower case);
    empty without a proxy. NO_PROXY keeps the cluster inside: its CIDRs and names, the VM's subnet, the server."""
    if proxy is None or not proxy.enabled:
        return {}
    server = urlsplit(rke2.server_url).hostname
    names = {"HTTP_PROXY": proxy.http, "HTTPS_PROXY": proxy.https}
    env = {name: url for name, url in names.items() if url}
    env["NO_PROXY"] = no_proxy_for(proxy, (rke2.cluster_cidr, rke2.service_cidr), subnet, server)
    return {**env, **{name.lower(): value for name, value in env.items()}}


def installer_hosts(proxy: ProxyConfig, rke2: Rke2Config) -> list[tuple[str, int]]:
    """The hosts the RKE2 installer downloads from through the proxy: the script's and the artifacts' (GitHub
    where no mirror is set), with their ports; those NO_PROXY names reach directly are left out."""
    urls = [rke2.installer.script, rke2.installer.artifacts or "https://github.com"]
    hosts: list[tuple[str, int]] = []
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if any(host == entry or (entry.startswith(".") and host.endswith(entry)) for entry in proxy.no_proxy):
            continue
        hosts.append((host, parts.port or (443 if parts.scheme == "https" else 80)))
    return list(dict.fromkeys(hosts))


def subnet_of(ipv4: str) -> str | None:
    """`10.0.20.31/24` -> `10.0.20.0/24`; None for dhcp (the subnet is the DHCP server's)."""
    if ipv4 == "dhcp":
        return None
    return str(ipaddress.IPv4Interface(ipv4).network)
