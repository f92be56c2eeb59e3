"""Cloud-init user data of a GPU worker: what the VM does on first boot."""

from __future__ import annotations

from typing import Any

import yaml

from components.gpu_failure_domain.cloud_init import build_user_data, rke2_agent_config
from config.failure_domain import FailureDomainConfig
from config.rke2 import Rke2Config

RKE2 = Rke2Config.model_validate({"serverUrl": "https://rke2.lab:9345", "version": "v1.33.5+rke2r1"})
DOMAIN = FailureDomainConfig.model_validate(
    {
        "name": "dc1",
        "proxmoxNode": "pve-dc1",
        "vmId": 4101,
        "hostname": "rke2-worker-dc1-gpu-a",
        "sharing": "a1000-x4",
        "gpu": {
            "pciAddress": "0000:01:00",
            "vendorDeviceId": "10de:25b0",
            "subsystemId": "10de:1757",
            "iommuGroup": 14,
            "model": "NVIDIA RTX A1000",
        },
    }
)


def cloud_config(domain: FailureDomainConfig = DOMAIN) -> dict[str, Any]:
    text = build_user_data(domain, RKE2, "tok")
    assert text.startswith("#cloud-config\n")
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def written(path: str, domain: FailureDomainConfig = DOMAIN) -> str:
    return str(next(f["content"] for f in cloud_config(domain)["write_files"] if f["path"] == path))


def test_rke2_config_registers_the_node_with_its_labels_and_taint():
    config = yaml.safe_load(written("/etc/rancher/rke2/config.yaml"))
    assert config["server"] == "https://rke2.lab:9345"
    assert config["node-name"] == "rke2-worker-dc1-gpu-a"
    assert config["node-label"] == [
        "nodepool=gpu",
        "nvidia.com/device-plugin.config=a1000-x4",
        "topology.kubernetes.io/zone=dc1",
    ]
    assert config["node-taint"] == ["nvidia.com/gpu=true:NoSchedule"]


def test_rke2_config_is_only_readable_by_root_because_it_holds_the_token():
    entry = next(f for f in cloud_config()["write_files"] if f["path"] == "/etc/rancher/rke2/config.yaml")
    assert entry["permissions"] == "0600"
    assert rke2_agent_config(DOMAIN, RKE2, "tok")["token"] == "tok"


def test_the_pinned_rke2_agent_version_is_installed():
    install = next(c for c in cloud_config()["runcmd"] if "get.rke2.io" in c)
    assert "INSTALL_RKE2_TYPE=agent" in install
    assert 'INSTALL_RKE2_VERSION="v1.33.5+rke2r1"' in install
    assert "systemctl enable --now rke2-agent.service" in cloud_config()["runcmd"]


def test_headers_for_the_running_kernel_are_installed_for_the_driver_build():
    assert any('"linux-headers-$(uname -r)"' in c for c in cloud_config()["runcmd"])


def test_a_pinned_kernel_installs_and_holds_that_kernel_and_its_headers():
    pinned = DOMAIN.model_copy(update={"kernel": "6.8.0-60-generic"})
    commands = cloud_config(pinned)["runcmd"]
    assert any('"linux-headers-6.8.0-60-generic"' in c and "apt-get install" in c for c in commands)
    assert any(c.startswith("apt-mark hold") and "linux-image-6.8.0-60-generic" in c for c in commands)


def test_kernel_packages_are_held_against_unattended_upgrades():
    assert any(c.startswith("apt-mark hold linux-generic") for c in cloud_config()["runcmd"])
    assert '"linux-"' in written("/etc/apt/apt.conf.d/51gpu-pool-no-kernel-upgrades")


def test_nouveau_is_kept_out_of_the_guest():
    assert "blacklist nouveau" in written("/etc/modprobe.d/blacklist-nouveau.conf")
    assert "update-initramfs -u" in cloud_config()["runcmd"]
