"""The GPU Operator driver container's package sources for a lab with its own Ubuntu archive (`gpu-pool:aptMirror`).

The driver container installs `linux-headers-$(uname -r)` from the Ubuntu archive to build nvidia.ko. NVIDIA's
air-gap guide points it at a mirror with a ConfigMap named by `driver.repoConfig.configMapName`: the operator mounts
each of its keys as a file of /etc/apt/sources.list.d in the driver container (gpu-operator v26.7.0
controllers/object_controls.go, RepoConfigPathMap["ubuntu"] and createConfigMapVolumeMounts, one subPath mount per
key). The key is `ubuntu.sources`, the file Ubuntu 24.04's images keep their archive sources in (deb822): mounted
over it, the archive is replaced by the mirror instead of added beside an archive the lab cannot reach.
"""

from __future__ import annotations

from typing import Any

from config.proxy import AptMirrorConfig

APT_SOURCES_CONFIGMAP = "gpu-pool-apt-sources"
APT_SOURCES_KEY = "ubuntu.sources"
# The keyring Ubuntu's images verify the archive with (package ubuntu-keyring): a mirror serves the archive's
# signed Release files as they are.
UBUNTU_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
COMPONENTS = "main restricted universe multiverse"


def apt_sources(mirror: AptMirrorConfig, codename: str) -> str:
    """deb822 sources: the release and its updates from the mirror, its security suite from the security mirror."""
    stanzas = [
        (mirror.uri, f"{codename} {codename}-updates"),
        (mirror.security, f"{codename}-security"),
    ]
    return "\n".join(
        f"Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {COMPONENTS}\nSigned-By: {UBUNTU_KEYRING}\n"
        for uri, suites in stanzas
    )


def build_apt_sources_configmap(mirror: AptMirrorConfig, codename: str, namespace: str) -> dict[str, Any]:
    """The v1 ConfigMap `driver.repoConfig` names, in the operator's namespace (the operator reads it there)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": APT_SOURCES_CONFIGMAP, "namespace": namespace},
        "data": {APT_SOURCES_KEY: apt_sources(mirror, codename)},
    }
