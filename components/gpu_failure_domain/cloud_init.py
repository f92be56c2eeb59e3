"""Cloud-init user data that turns a fresh Ubuntu cloud image into an RKE2 GPU worker."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from components.gpu_failure_domain.first_boot import FirstBootStep, first_boot_runcmd, runner_file
from components.gpu_failure_domain.node_metadata import registration_labels
from components.gpu_failure_domain.registries import RKE2_REGISTRIES_FILE, RKE2_TRUSTED_CA_FILE, registry_files
from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.plain_credentials import with_userinfo
from config.proxmox import CODENAME_OF
from config.proxy import AptMirrorConfig, ProxyConfig, apt_direct_hosts, proxy_environment, subnet_of
from config.rke2 import DEFAULT_INSTALL_SCRIPT, Rke2Config
from config.trust import certificates_of

RKE2_INSTALL_URL = DEFAULT_INSTALL_SCRIPT
# Kernel packages held so no unattended upgrade swaps the kernel under the driver: a new kernel
# without a rebuilt module is the article's "Unknown symbol __register_chrdev" trap.
HELD_KERNEL_PACKAGES = ("linux-generic", "linux-image-generic", "linux-headers-generic", "linux-virtual")
# The running kernel's own packages, held too. No headers are installed on the host: the driver container
# installs linux-headers-<running kernel> inside itself from the Ubuntu archive (gpu-driver-container
# ubuntu24.04/nvidia-driver), so what the build needs is egress to the archive and a kernel the archive
# still serves headers for, which the hold keeps stable.
RUNNING_KERNEL_PACKAGES = ('"linux-image-$(uname -r)"', '"linux-modules-$(uname -r)"')


# Where RKE2's systemd unit reads its environment (RKE2 docs, "Configure an HTTP proxy"): the agent and the
# containerd it starts pull images through the proxy.
RKE2_AGENT_ENV_FILE = "/etc/default/rke2-agent"
# The lab CA in the VM's system store (what cloud-init's ca_certs module writes at first boot; the files turn writes
# it here and runs update-ca-certificates): curl, apt and containerd trust it.
SYSTEM_TRUSTED_CA_FILE = "/usr/local/share/ca-certificates/gpu-pool-trusted-ca.crt"
# Where RKE2's release files come from without an installer mirror (install.sh's default INSTALL_RKE2_ARTIFACT_URL).
GITHUB_RELEASES = "https://github.com/rancher/rke2/releases/download"
# The guest agent Proxmox reads the VM's addresses and shuts it down through; the only package the first boot
# installs (curl and ca-certificates are in Ubuntu's cloud images).
FIRST_BOOT_PACKAGES = ("qemu-guest-agent",)
# The file cloud-init's apt module writes its proxy keys to (cc_apt_configure's APT_PROXY_FN): a wave that adds
# or changes the proxy on a VM that exists writes the same file, so apt (the kernel wave's) uses it.
APT_PROXY_FILE = "/etc/apt/apt.conf.d/90cloud-init-aptproxy"
# Every file the egress settings own on a VM: a turn writes those the stack asks for and removes the others.
# registries.yaml (and the TLS files it names) may carry secrets: the turn gets them on its standard input.
EGRESS_FILES = (RKE2_AGENT_ENV_FILE, RKE2_REGISTRIES_FILE, APT_PROXY_FILE, RKE2_TRUSTED_CA_FILE, SYSTEM_TRUSTED_CA_FILE)
# Where cloud-init's apt module writes the release's sources from `apt: primary/security` (cc_apt_configure
# generate_sources_list): deb822 `ubuntu.sources` where its APT_DEB822_SOURCE_LIST_FILE feature is on (Ubuntu
# 24.04 and later), the one-line `sources.list` on 22.04, whose package turns it off ("can be removed when Jammy
# is no longer supported", cloudinit/features.py). A turn never removes this file: without a mirror it writes
# the archive a new VM's cloud-init writes (cc_apt_configure PRIMARY_ARCH_MIRRORS).
DEB822_SOURCES_FILE = "/etc/apt/sources.list.d/ubuntu.sources"
ONE_LINE_SOURCES_FILE = "/etc/apt/sources.list"
UBUNTU_ARCHIVE = AptMirrorConfig.model_validate(
    {"uri": "http://archive.ubuntu.com/ubuntu", "securityUri": "http://security.ubuntu.com/ubuntu"}
)
_ONE_LINE_RELEASES = ("ubuntu-22.04",)
_COMPONENTS = "main universe restricted multiverse"
_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
# Marks the file as gpu-pool's: a person reading it on the VM knows which key writes it.
SOURCES_HEADER = "## Written by gpu-pool (gpu-pool:aptMirror) as cloud-init's apt module writes it at first boot.\n"


def artifact_env(rke2: Rke2Config) -> str:
    """`INSTALL_RKE2_ARTIFACT_URL=<artifacts> ` for an installer mirror (install.sh: the release files from there
    instead of GitHub), or nothing."""
    artifacts = rke2.installer.artifacts
    return f"INSTALL_RKE2_ARTIFACT_URL={shlex.quote(artifacts)} " if artifacts else ""


def exports(env: Mapping[str, str]) -> str:
    """One `export` line for a shell script (cloud-init's runcmd, a remote step); empty for no variables."""
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items()) if env else ""


def rke2_agent_config(
    domain: FailureDomainConfig, rke2: Rke2Config, token: str, marking: GpuNodeMarking = ARTICLE_MARKING
) -> dict[str, Any]:
    """/etc/rancher/rke2/config.yaml: labels and the taint are set at registration, before any pod can land.

    The sharing profile label is not here: the stack sets it by NodePatch (see `registration_labels`).
    """
    return {
        "server": rke2.server_url,
        "token": token,
        "node-name": domain.hostname,
        "node-label": [f"{key}={value}" for key, value in sorted(registration_labels(domain, marking).items())],
        "node-taint": [marking.taint],
    }


def _apt_settings(proxy: ProxyConfig | None, apt_mirror: AptMirrorConfig | None) -> dict[str, Any]:
    """cloud-config's `apt:` keys, which its apt module writes before any package is installed (cc_apt_configure):
    the proxy (apt never reads NO_PROXY, so a mirror NO_PROXY reaches directly is `DIRECT` by name) and the
    release's sources from the mirror (primary for the release and its updates, security for -security). A proxy
    with a login is not here: cloud-init writes these keys world-readable (0644), so its file is a root-only one of
    write_files (apt_proxy_file)."""
    apt: dict[str, Any] = {}
    if proxy is not None and proxy.enabled and not proxy.login:
        apt = {f"{scheme}_proxy": url for scheme, url in (("http", proxy.http), ("https", proxy.https)) if url}
        direct = _apt_direct_lines(proxy, apt_mirror)
        if direct:
            apt["conf"] = direct
    if apt_mirror is not None:
        apt["primary"] = [{"arches": ["default"], "uri": apt_mirror.uri}]
        apt["security"] = [{"arches": ["default"], "uri": apt_mirror.security}]
    return apt


def _apt_direct_lines(proxy: ProxyConfig, apt_mirror: AptMirrorConfig | None) -> str:
    return "".join(
        f'Acquire::{scheme}::Proxy::{host} "DIRECT";\n'
        for host in apt_direct_hosts(proxy, apt_mirror)
        for scheme in ("http", "https")
    )


def _trusted_ca_files(trusted_ca: str | None) -> list[dict[str, str]]:
    """The lab CA for containerd's mirror hosts (registries.yaml tls.ca_file names it)."""
    return [{"path": RKE2_TRUSTED_CA_FILE, "permissions": "0644", "content": trusted_ca}] if trusted_ca else []


def apt_sources_file(mirror: AptMirrorConfig, guest_os: str) -> dict[str, str]:
    """The release's apt sources as cloud-init's apt module writes them from `apt: primary/security` (its
    templates sources.list.ubuntu.deb822.tmpl and sources.list.ubuntu.tmpl: the release, -updates and -backports
    from the primary archive, -security from the security one), for the file that release's cloud-init writes."""
    codename = CODENAME_OF[guest_os]
    if guest_os in _ONE_LINE_RELEASES:
        suites = [(mirror.uri, codename), (mirror.uri, f"{codename}-updates"), (mirror.uri, f"{codename}-backports")]
        lines = [
            f"deb {uri} {suite} {_COMPONENTS}\n" for uri, suite in [*suites, (mirror.security, f"{codename}-security")]
        ]
        return {"path": ONE_LINE_SOURCES_FILE, "permissions": "0644", "content": SOURCES_HEADER + "".join(lines)}
    stanzas = [
        (mirror.uri, f"{codename} {codename}-updates {codename}-backports"),
        (mirror.security, f"{codename}-security"),
    ]
    text = "\n".join(
        f"Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {_COMPONENTS}\nSigned-By: {_KEYRING}\n"
        for uri, suites in stanzas
    )
    return {"path": DEB822_SOURCES_FILE, "permissions": "0644", "content": SOURCES_HEADER + text}


def egress_files(
    domain: FailureDomainConfig,
    rke2: Rke2Config,
    proxy: ProxyConfig | None,
    mirrors: Mapping[str, Any] | None,
    apt_mirror: AptMirrorConfig | None = None,
    guest_os: str = "ubuntu-24.04",
    trusted_ca: str | None = None,
) -> list[dict[str, str]]:
    """The egress files a domain's VM holds once set up: what cloud-init writes at first boot, plus apt's proxy file,
    the release's sources and the lab CA in the system store that cloud-init's `apt:` and `ca_certs` keys become.
    The wave's files turn writes exactly these (rollout.node_files_command), registries.yaml from its standard
    input (here without the secret registryAuth, whose change alone rolls nothing). The sources only with a mirror:
    a stack without one records what it did before."""
    env = proxy_environment(proxy, rke2, subnet_of(domain.network.ipv4))
    files: list[dict[str, str]] = []
    # A proxy with a login: its two files carry gpu-pool:proxyAuth and travel with the secret files
    # (proxy_secret_files), never in this list, which the files turn's command holds in clear.
    if env and proxy is not None and not proxy.login:
        files.append(_agent_env_file(env))
    files += registry_files(mirrors, bool(trusted_ca), None)[:1]
    if proxy is not None and proxy.enabled and not proxy.login:
        files.append(apt_proxy_file(proxy, apt_mirror, None))
    files += _trusted_ca_files(trusted_ca)
    if trusted_ca:
        files.append({"path": SYSTEM_TRUSTED_CA_FILE, "permissions": "0644", "content": trusted_ca})
    if apt_mirror is not None:
        files.append(apt_sources_file(apt_mirror, guest_os))
    return files


def apt_proxy_file(proxy: ProxyConfig, apt_mirror: AptMirrorConfig | None, login: str | None) -> dict[str, str]:
    """apt's proxy settings (root-only: with a login, the URLs carry gpu-pool:proxyAuth), the lab's own mirror
    `DIRECT` where NO_PROXY reaches it (apt never reads NO_PROXY)."""
    urls = {"http": proxy.http, "https": proxy.https}
    lines = "".join(
        f'Acquire::{scheme}::Proxy "{with_userinfo(url, login) if login else url}";\n'
        for scheme, url in urls.items()
        if url
    )
    return {"path": APT_PROXY_FILE, "permissions": "0600", "content": lines + _apt_direct_lines(proxy, apt_mirror)}


def proxy_secret_files(
    domain: FailureDomainConfig,
    rke2: Rke2Config,
    proxy: ProxyConfig | None,
    apt_mirror: AptMirrorConfig | None,
    login: str | None,
) -> list[dict[str, str]]:
    """With `proxy.login`: /etc/default/rke2-agent and apt's proxy file, their URLs carrying the login (both 0600,
    root): what the snippet and the files turn's standard input write; empty otherwise."""
    if proxy is None or not proxy.enabled or not proxy.login or not login:
        return []
    env = proxy_environment(proxy, rke2, subnet_of(domain.network.ipv4), login)
    return [_agent_env_file(env), apt_proxy_file(proxy, apt_mirror, login)]


# With a proxy login, a first boot or remote step reads the proxy's variables from the root-only file instead of
# having them on its command line (which `ps` shows every user, and a plan holds in clear).
SOURCE_AGENT_ENV = f"set -a; . {RKE2_AGENT_ENV_FILE}; set +a"


def _agent_env_file(env: Mapping[str, str]) -> dict[str, str]:
    # The proxy URL may carry a password.
    return {
        "path": RKE2_AGENT_ENV_FILE,
        "permissions": "0600",
        "content": "".join(f"{name}={value}\n" for name, value in env.items()),
    }


def first_boot_steps(rke2: Rke2Config, apt_mirror: AptMirrorConfig | None = None) -> list[FirstBootStep]:
    """The first boot's steps, in order (first_boot.py). Essential: what joining the cluster needs (the installer,
    the install, the agent); the rest is recorded when it fails, and the boot goes on."""
    held = f"apt-mark hold {' '.join(HELD_KERNEL_PACKAGES)} {' '.join(RUNNING_KERNEL_PACKAGES)}"
    installer = rke2.installer
    return [
        # The package lists and the guest agent (cloud-init's `apt:` sources and proxy are written by then).
        # --error-on=any: a mirror that lacks the release fails here, naming it, instead of a later "Unable to
        # locate package".
        FirstBootStep(
            "packages",
            "optional",
            "apt-get update -q --error-on=any && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
            + " ".join(FIRST_BOOT_PACKAGES),
            download=True,
            url=(apt_mirror or UBUNTU_ARCHIVE).uri,
        ),
        # Hold the kernel: an unattended kernel upgrade strands the module (kernel upgrades are a deliberate op,
        # gpu-pool:failureDomains[].kernel). The unattended-upgrades blacklist (write_files) holds it too.
        FirstBootStep("hold-kernel", "optional", held),
        # nouveau must never bind the card in the guest: the NVIDIA driver container cannot load beside it.
        FirstBootStep("initramfs", "optional", "update-initramfs -u"),
        FirstBootStep("nouveau", "optional", "modprobe -r nouveau || true"),
        # Downloaded first, not piped: in a pipe only the shell's exit is seen, never curl's.
        FirstBootStep(
            "fetch-installer",
            "essential",
            f"curl -fsSL {shlex.quote(installer.script)} -o /run/install-rke2.sh",
            download=True,
            url=installer.script,
        ),
        FirstBootStep(
            "install-rke2",
            "essential",
            f'{artifact_env(rke2)}INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION="{rke2.version}" '
            "sh /run/install-rke2.sh",
            download=True,
            url=installer.artifacts or GITHUB_RELEASES,
        ),
        FirstBootStep("guest-agent", "optional", "systemctl enable --now qemu-guest-agent"),
        FirstBootStep("rke2-agent", "essential", "systemctl enable --now rke2-agent.service"),
    ]


def user_data_document(
    domain: FailureDomainConfig,
    rke2: Rke2Config,
    token: str,
    marking: GpuNodeMarking = ARTICLE_MARKING,
    proxy: ProxyConfig | None = None,
    mirrors: Mapping[str, Any] | None = None,
    registry_auth: str | None = None,
    apt_mirror: AptMirrorConfig | None = None,
    trusted_ca: str | None = None,
    proxy_auth: str | None = None,
) -> dict[str, Any]:
    """The `#cloud-config` document as data: what cloud-init reads back from the text `build_user_data` writes
    (tests/gpu_failure_domain/test_cloud_init.py proves it for every shipped stack). The checks on the rendered
    plan read this, not a parse of the text they would have to write first. It holds the join token."""
    user: dict[str, Any] = {
        "name": domain.username,
        "groups": ["sudo"],
        "shell": "/bin/bash",
        "sudo": "ALL=(ALL) NOPASSWD:ALL",
    }
    if domain.ssh_authorized_keys:
        user["ssh_authorized_keys"] = list(domain.ssh_authorized_keys)
    env = proxy_environment(proxy, rke2, subnet_of(domain.network.ipv4))
    # Where no login is at hand (the rendered plan's checks), its name stands in for it.
    login_files = proxy_secret_files(domain, rke2, proxy, apt_mirror, proxy_auth or "gpu-pool:proxyAuth")
    # Behind a proxy, every step's downloads (curl, from the installer's hosts) go through it; with a login, read
    # from the root-only file that carries it.
    prelude = [SOURCE_AGENT_ENV] if login_files else ([exports(env)] if env else [])
    runcmd = first_boot_runcmd(prelude, first_boot_steps(rke2, apt_mirror), domain.hostname)
    apt = _apt_settings(proxy, apt_mirror)
    certificates = certificates_of(trusted_ca)
    secret_files = registry_files(mirrors, bool(certificates), registry_auth)
    document: dict[str, Any] = {
        "hostname": domain.hostname,
        "manage_etc_hosts": True,
        "users": [user],
        # The lab CA into the system store (cc_ca_certs, before any download): curl, apt, containerd trust it.
        **({"ca_certs": {"trusted": list(certificates)}} if certificates else {}),
        **({"apt": apt} if apt else {}),
        "write_files": [
            {
                "path": "/etc/modprobe.d/blacklist-nouveau.conf",
                "permissions": "0644",
                "content": "blacklist nouveau\noptions nouveau modeset=0\n",
            },
            {
                "path": "/etc/rancher/rke2/config.yaml",
                "permissions": "0600",
                "content": yaml.safe_dump(rke2_agent_config(domain, rke2, token, marking), sort_keys=True),
            },
            {
                "path": "/etc/apt/apt.conf.d/51gpu-pool-no-kernel-upgrades",
                "permissions": "0644",
                "content": 'Unattended-Upgrade::Package-Blacklist { "linux-"; };\n',
            },
            runner_file(),
            *(login_files or ([_agent_env_file(env)] if env and proxy is not None and not proxy.login else [])),
            *_trusted_ca_files("".join(certificates)),
            *secret_files[:1],
            # A file of the secret (a client key) as base64: one line, which the preview replaces with a marker.
            *(
                {**file, "content": base64.b64encode(file["content"].encode()).decode(), "encoding": "b64"}
                for file in secret_files[1:]
            ),
        ],
        "runcmd": runcmd,
    }
    return document


def build_user_data(
    domain: FailureDomainConfig,
    rke2: Rke2Config,
    token: str,
    marking: GpuNodeMarking = ARTICLE_MARKING,
    proxy: ProxyConfig | None = None,
    mirrors: Mapping[str, Any] | None = None,
    registry_auth: str | None = None,
    apt_mirror: AptMirrorConfig | None = None,
    trusted_ca: str | None = None,
    proxy_auth: str | None = None,
) -> str:
    """The `#cloud-config` document. It holds the join token, the registry credentials and the proxy's login:
    callers must keep the result secret."""
    document = user_data_document(
        domain, rke2, token, marking, proxy, mirrors, registry_auth, apt_mirror, trusted_ca, proxy_auth
    )
    return "#cloud-config\n" + yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, width=1000)


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (the files cloud-init writes) as `|` blocks, so a person can review them as files."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _text)
