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

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.base import ConfigModel
from config.errors import SECRET_VALUE_ERROR
from config.plain_credentials import has_userinfo, with_userinfo, without_userinfo
from config.rke2 import Rke2Config

# The names inside a cluster that never go through a proxy (RKE2's proxy docs list these with the CIDRs).
CLUSTER_NAMES = (".svc", ".cluster.local", "localhost", "127.0.0.1")


# The proxy's login is the secret gpu-pool:proxyAuth, never part of the URL (issue 50): a URL is quoted by plans,
# Helm values and messages. The fix, said whenever a URL carries one.
LOGIN_FIX = (
    "write the URL without user:password@ and give the login as a secret: set `login: true` under gpu-pool:proxy and "
    "run pulumi config set --secret gpu-pool:proxyAuth 'user:password' (docs/secrets.md)"
)


def _proxy_url(value: str | None) -> str | None:
    if value is None:
        return None
    if has_userinfo(value):
        # Raised without the value, whatever else is wrong with it: a `#` in the password makes the URL unparsable.
        raise PydanticCustomError(SECRET_VALUE_ERROR, f"carries a login (value not shown): {LOGIN_FIX}")
    shown = without_userinfo(value)
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{shown!r} is not a proxy URL: write http://<host>:<port>, e.g. http://proxy.lab:3128")
    try:
        port = parts.port
    except ValueError:
        port = None
        raise ValueError(f"{shown!r} has a port that is not a number") from None
    if port is None:
        raise ValueError(f"{shown!r} names no port: write it, e.g. http://{parts.hostname}:3128")
    if parts.path.strip("/") or parts.query:
        raise ValueError(f"{shown!r} has a path: a proxy is http://<host>:<port> alone")
    return value.rstrip("/")


class ProxyConfig(ConfigModel):
    http: str | None = Field(default=None, description="proxy for http:// URLs, e.g. http://proxy.lab:3128")
    https: str | None = Field(
        default=None, description="proxy for https:// URLs (most downloads), e.g. http://proxy.lab:3128"
    )
    login: bool = Field(
        default=False,
        strict=True,
        description="the proxy asks for a login: give it as the secret gpu-pool:proxyAuth (user:password), never in "
        "the URLs; it reaches the VMs in root-only files and the driver container through a Kubernetes Secret",
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
            if "://" in entry or ("/" in entry and not _is_cidr(entry)):
                # curl and Go compare NO_PROXY entries with the host alone: a URL never matches, and its host then
                # goes through the proxy (or, air-gapped, nowhere).
                host = urlsplit(entry if "://" in entry else f"//{entry}").hostname or entry
                raise ValueError(
                    f"{entry!r} is a URL: NO_PROXY entries are hosts ({host}), domains (.{host.split('.', 1)[-1]}) "
                    "or CIDRs, compared with the host alone"
                )
        return value

    @model_validator(mode="after")
    def _https_downloads(self) -> ProxyConfig:
        if self.http and not self.https:
            # Every download of a first boot is https (get.rke2.io, GitHub, the registries): with only `http`,
            # curl and containerd go direct, which a lab behind a proxy cannot.
            raise ValueError(
                f"has http alone, and every download the VMs make is https (the RKE2 installer, GitHub, the "
                f"registries), which would then go direct: set https too (most proxies take both on one port: "
                f"https: {self.http})"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.http or self.https)


def _is_cidr(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


# `.../ubuntu/dists/noble`: a suite's folder, copied from a browser; apt appends dists/<suite> itself.
DISTS_SUFFIX = re.compile(r"/dists(/[^/]*)*/?$")


def _archive_url(value: str | None) -> str | None:
    if value is None:
        return None
    if has_userinfo(value):
        # The same sources reach the driver container as a ConfigMap (driver.repoConfig), where a login would be in
        # clear for anyone who reads ConfigMaps in the operator's namespace.
        raise PydanticCustomError(
            SECRET_VALUE_ERROR,
            "carries a login (value not shown): the archive's sources are also the driver container's ConfigMap "
            "(driver.repoConfig), readable in clear; write the URL without user:password@ and let the mirror admit "
            "the lab's VMs and pods by address (docs/secrets.md)",
        )
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{without_userinfo(value)!r} is not an archive URL: write http://<host>/ubuntu, as an Ubuntu archive "
            "mirror serves it (dists/ and pool/ below it)"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            f"{without_userinfo(value)!r} has a query or fragment: apt appends its own paths to the archive's URL"
        )
    return DISTS_SUFFIX.sub("", value.rstrip("/"))


def apt_mirror_notes(raw: object) -> list[str]:
    """What the aptMirror validator normalized: a suite's folder (`/dists/noble`) taken off the archive's URL."""
    if not isinstance(raw, dict):
        return []
    return [
        f"gpu-pool:aptMirror.{key}: {value} names a suite's folder; apt appends dists/<suite> to the archive's URL "
        f"itself, so it is written as {DISTS_SUFFIX.sub('', value.rstrip('/'))} (write that to silence this)"
        for key in ("uri", "securityUri")
        if isinstance(value := raw.get(key), str) and DISTS_SUFFIX.search(value.rstrip("/") or "/")
    ]


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


def proxy_environment(
    proxy: ProxyConfig | None, rke2: Rke2Config, subnet: str | None = None, login: str | None = None
) -> dict[str, str]:
    """HTTP_PROXY, HTTPS_PROXY, NO_PROXY and curl's lower-case names (curl reads only `http_proxy` in lower case);
    empty without a proxy. NO_PROXY keeps the cluster inside: its CIDRs and names, the VM's subnet, the server.
    `login`: gpu-pool:proxyAuth, written into the URLs (only for a root-only file or a Kubernetes Secret)."""
    if proxy is None or not proxy.enabled:
        return {}
    server = urlsplit(rke2.server_url).hostname
    names = {"HTTP_PROXY": proxy.http, "HTTPS_PROXY": proxy.https}
    env = {name: (with_userinfo(url, login) if login else url) for name, url in names.items() if url}
    env["NO_PROXY"] = no_proxy_for(proxy, (rke2.cluster_cidr, rke2.service_cidr), subnet, server)
    return {**env, **{name.lower(): value for name, value in env.items()}}


def reached_directly(proxy: ProxyConfig, host: str) -> bool:
    """Whether the user's NO_PROXY entries send `host` direct (a host, or a `.domain` it is under)."""
    return any(host == entry or (entry.startswith(".") and host.endswith(entry)) for entry in proxy.no_proxy)


def apt_direct_hosts(proxy: ProxyConfig | None, mirror: AptMirrorConfig | None) -> list[str]:
    """The apt mirror's hosts NO_PROXY reaches directly: apt never reads NO_PROXY, so its proxy settings would send
    the lab's own mirror through the proxy; apt.conf's per-host `DIRECT` keeps it off."""
    if proxy is None or not proxy.enabled or mirror is None:
        return []
    hosts = [urlsplit(url).hostname or "" for url in (mirror.uri, mirror.security)]
    return [host for host in dict.fromkeys(hosts) if host and reached_directly(proxy, host)]


def installer_hosts(proxy: ProxyConfig, rke2: Rke2Config) -> list[tuple[str, int]]:
    """The hosts the RKE2 installer downloads from through the proxy: the script's and the artifacts' (GitHub
    where no mirror is set), with their ports; those NO_PROXY names reach directly are left out."""
    urls = [rke2.installer.script, rke2.installer.artifacts or "https://github.com"]
    hosts: list[tuple[str, int]] = []
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if reached_directly(proxy, host):
            continue
        hosts.append((host, parts.port or (443 if parts.scheme == "https" else 80)))
    return list(dict.fromkeys(hosts))


def subnet_of(ipv4: str) -> str | None:
    """`10.0.20.31/24` -> `10.0.20.0/24`; None for dhcp (the subnet is the DHCP server's)."""
    if ipv4 == "dhcp":
        return None
    return str(ipaddress.IPv4Interface(ipv4).network)
