"""Cloud-init user data that turns a fresh Ubuntu cloud image into an RKE2 GPU worker."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from components.gpu_failure_domain.node_metadata import registration_labels
from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.proxmox import CODENAME_OF
from config.proxy import AptMirrorConfig, ProxyConfig, proxy_environment, registries_yaml, subnet_of
from config.rke2 import DEFAULT_INSTALL_SCRIPT, Rke2Config

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
# Where RKE2 reads its registry mirrors at start (it writes containerd's hosts.toml from it).
RKE2_REGISTRIES_FILE = "/etc/rancher/rke2/registries.yaml"
# The file cloud-init's apt module writes its proxy keys to (cc_apt_configure's APT_PROXY_FN): a wave that adds
# or changes the proxy on a VM that exists writes the same file, so apt (the kernel wave's) uses it.
APT_PROXY_FILE = "/etc/apt/apt.conf.d/90cloud-init-aptproxy"
# Every file the egress settings own on a VM: a turn writes those the stack asks for and removes the others.
EGRESS_FILES = (RKE2_AGENT_ENV_FILE, RKE2_REGISTRIES_FILE, APT_PROXY_FILE)
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


def registries_file(mirrors: Mapping[str, list[str]] | None, registry_auth: str | None = None) -> str:
    """registries.yaml's text. The credentials (gpu-pool:registryAuth, one line of JSON: JSON is YAML) go in as
    written, so the preview's redaction of the secret's value hides them whole, as it hides the join token."""
    text = yaml.safe_dump(registries_yaml(dict(mirrors or {})), sort_keys=True)
    return text + (f"configs: {registry_auth}\n" if registry_auth else "")


def _egress_settings(
    env: Mapping[str, str],
    proxy: ProxyConfig | None,
    mirrors: Mapping[str, list[str]] | None,
    registry_auth: str | None = None,
    apt_mirror: AptMirrorConfig | None = None,
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The files and apt settings a lab behind a proxy or with registry mirrors needs (docs/air-gap.md)."""
    write_files: list[dict[str, str]] = []
    apt: dict[str, Any] = {}
    if env and proxy is not None:
        write_files.append(
            {
                "path": RKE2_AGENT_ENV_FILE,
                # The proxy URL may carry a password.
                "permissions": "0600",
                "content": "".join(f"{name}={value}\n" for name, value in env.items()),
            }
        )
        # cloud-config's apt module writes these to apt's proxy settings before package_update (cc_apt_configure).
        apt = {f"{scheme}_proxy": url for scheme, url in (("http", proxy.http), ("https", proxy.https)) if url}
    if apt_mirror is not None:
        # cloud-config's apt module writes the release's sources with these archives (cc_apt_configure:
        # primary for the release and its updates, security for -security) before package_update.
        apt["primary"] = [{"arches": ["default"], "uri": apt_mirror.uri}]
        apt["security"] = [{"arches": ["default"], "uri": apt_mirror.security}]
    if mirrors or registry_auth:
        write_files.append(
            {"path": RKE2_REGISTRIES_FILE, "permissions": "0600", "content": registries_file(mirrors, registry_auth)}
        )
    return write_files, apt


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
    mirrors: Mapping[str, list[str]] | None,
    apt_mirror: AptMirrorConfig | None = None,
    guest_os: str = "ubuntu-24.04",
) -> list[dict[str, str]]:
    """The egress files a domain's VM holds once set up: what cloud-init writes at first boot, plus apt's proxy file
    and the release's sources that cloud-init's `apt:` keys become. The wave's files turn writes exactly these
    (rollout.node_files_command). The sources only with a mirror: a stack without one records what it did before."""
    env = proxy_environment(proxy, rke2, subnet_of(domain.network.ipv4))
    files, apt = _egress_settings(env, proxy, mirrors)
    if apt:
        lines = "".join(f'Acquire::{key.removesuffix("_proxy")}::Proxy "{url}";\n' for key, url in apt.items())
        files.append({"path": APT_PROXY_FILE, "permissions": "0600", "content": lines})
    if apt_mirror is not None:
        files.append(apt_sources_file(apt_mirror, guest_os))
    return files


def user_data_document(
    domain: FailureDomainConfig,
    rke2: Rke2Config,
    token: str,
    marking: GpuNodeMarking = ARTICLE_MARKING,
    proxy: ProxyConfig | None = None,
    mirrors: Mapping[str, list[str]] | None = None,
    registry_auth: str | None = None,
    apt_mirror: AptMirrorConfig | None = None,
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
    runcmd: list[str] = [
        # runcmd is one shell script: stop at the first failure, so a failed RKE2 install shows in
        # /var/log/cloud-init-output.log instead of a node that silently never registers.
        "set -e",
        # Behind a proxy, the installer's downloads (curl, from get.rke2.io and GitHub) go through it.
        *([exports(env)] if env else []),
        # Hold the kernel: an unattended kernel upgrade strands the module (kernel upgrades are a deliberate op,
        # gpu-pool:failureDomains[].kernel).
        f"apt-mark hold {' '.join(HELD_KERNEL_PACKAGES)} {' '.join(RUNNING_KERNEL_PACKAGES)}",
        # nouveau must never bind the card in the guest: the NVIDIA driver container cannot load beside it.
        "update-initramfs -u",
        "modprobe -r nouveau || true",
        # Downloaded first, not piped: in a pipe `set -e` only sees the shell's exit, never curl's.
        f"curl -sfL {shlex.quote(rke2.installer.script)} -o /run/install-rke2.sh",
        f'{artifact_env(rke2)}INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION="{rke2.version}" sh /run/install-rke2.sh',
        "systemctl enable --now qemu-guest-agent",
        "systemctl enable --now rke2-agent.service",
    ]
    write_files, apt = _egress_settings(env, proxy, mirrors, registry_auth, apt_mirror)
    document: dict[str, Any] = {
        "hostname": domain.hostname,
        "manage_etc_hosts": True,
        "users": [user],
        **({"apt": apt} if apt else {}),
        "package_update": True,
        "packages": ["qemu-guest-agent", "curl", "ca-certificates"],
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
            *write_files,
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
    mirrors: Mapping[str, list[str]] | None = None,
    registry_auth: str | None = None,
    apt_mirror: AptMirrorConfig | None = None,
) -> str:
    """The `#cloud-config` document. It holds the join token and the registry credentials: callers must keep the
    result secret."""
    document = user_data_document(domain, rke2, token, marking, proxy, mirrors, registry_auth, apt_mirror)
    return "#cloud-config\n" + yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, width=1000)


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (the files cloud-init writes) as `|` blocks, so a person can review them as files."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _text)
