"""Cloud-init user data of a GPU worker: what the VM does on first boot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import build_user_data, rke2_agent_config, user_data_document
from components.gpu_failure_domain.first_boot import step_commands
from components.shared.node_marking import GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.rke2 import Rke2Config
from offline.runner import ROOT_DIR
from tests.plugin_recording import stack_config, valid_stack_files

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
    assert config["node-label"] == ["nodepool=gpu", "topology.kubernetes.io/zone=dc1"]
    assert config["node-taint"] == ["nvidia.com/gpu=true:NoSchedule"]


def rke2_agent_start(labels: dict[str, str], config: dict[str, Any]) -> dict[str, str]:
    """RKE2's agent at every start patches its node-label values onto the node (k3s pkg/agent/run.go,
    configureNode -> updateMutableLabels); labels it was not given are left alone."""
    given = dict(item.split("=", 1) for item in config["node-label"])
    return {**labels, **given}


def test_a_sharing_profile_changed_on_day_2_survives_the_next_reboot_of_the_node():
    config = yaml.safe_load(written("/etc/rancher/rke2/config.yaml"))
    registered = rke2_agent_start({}, config)
    # Day 2: the stack's NodePatch moves dc1 from a1000-x4 to whole; then the node reboots.
    patched = {**registered, "nvidia.com/device-plugin.config": "whole"}
    assert rke2_agent_start(patched, config)["nvidia.com/device-plugin.config"] == "whole"


def test_nothing_a_day_2_change_can_touch_is_in_the_first_boot_document():
    moved = DOMAIN.model_copy(update={"sharing": "whole", "kernel": "6.8.0-60-generic"})
    assert build_user_data(moved, RKE2, "tok") == build_user_data(DOMAIN, RKE2, "tok")


def test_rke2_config_is_only_readable_by_root_because_it_holds_the_token():
    entry = next(f for f in cloud_config()["write_files"] if f["path"] == "/etc/rancher/rke2/config.yaml")
    assert entry["permissions"] == "0600"
    assert rke2_agent_config(DOMAIN, RKE2, "tok")["token"] == "tok"


def steps(domain: FailureDomainConfig = DOMAIN) -> dict[str, tuple[str, str]]:
    """name -> (kind, command) of the first boot's steps, as the rendered runcmd runs them."""
    return step_commands(cloud_config(domain)["runcmd"])


def test_the_pinned_rke2_agent_version_is_installed():
    kind, install = steps()["install-rke2"]
    assert kind == "essential-download"
    assert "INSTALL_RKE2_TYPE=agent" in install
    assert 'INSTALL_RKE2_VERSION="v1.33.5+rke2r1"' in install
    assert steps()["rke2-agent"] == ("essential", "systemctl enable --now rke2-agent.service")


def test_no_host_headers_are_installed_because_the_driver_container_fetches_its_own():
    assert not [c for _, c in steps().values() if "linux-headers-$(uname -r)" in c]
    assert "apt-get install -y -q qemu-guest-agent" in steps()["packages"][1]


def test_the_running_kernel_is_held_so_the_archive_keeps_serving_the_headers_the_driver_builds_against():
    _, hold = steps()["hold-kernel"]
    assert '"linux-image-$(uname -r)"' in hold and '"linux-modules-$(uname -r)"' in hold


def test_kernel_packages_are_held_against_unattended_upgrades():
    assert steps()["hold-kernel"][1].startswith("apt-mark hold linux-generic")
    assert '"linux-"' in written("/etc/apt/apt.conf.d/51gpu-pool-no-kernel-upgrades")


def test_nouveau_is_kept_out_of_the_guest():
    assert "blacklist nouveau" in written("/etc/modprobe.d/blacklist-nouveau.conf")
    assert steps()["initramfs"][1] == "update-initramfs -u"


def test_joining_depends_only_on_the_installer_its_install_and_the_agent():
    essential = [name for name, (kind, _) in steps().items() if kind.startswith("essential")]
    assert essential == ["fetch-installer", "install-rke2", "rke2-agent"]
    # cloud-init's own package modules would fail the boot silently, before runcmd: the packages are a step.
    assert "packages" not in cloud_config() and "package_update" not in cloud_config()


SHIPPED = valid_stack_files()
SHIPPED = valid_stack_files()
# Join tokens as RKE2 writes them, and ones with YAML's own characters in them.
TOKENS = ["K10" + "ab12" * 16 + "::server:5f2b8c", "tok: with # and 'quotes' and \"more\"", "on", "0x10", "- a"]


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT_DIR)) for p in SHIPPED])
def test_cloud_init_reads_from_the_text_exactly_the_document_the_plans_checks_read(path: Path) -> None:
    """The rendered plan's rules read `user_data_document`, never a parse of the text: they hold only while the
    two are the same, for every domain of every shipped stack and for tokens YAML would misread if unquoted."""
    stack = stack_config(path.name.split(".")[1], path.parent)
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    for domain in stack.failure_domains:
        for token in TOKENS:
            text = build_user_data(domain, stack.rke2, token, marking)
            assert yaml.safe_load(text) == user_data_document(domain, stack.rke2, token, marking)
