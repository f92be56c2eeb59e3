"""Bad stack config: one clear message naming the key, and nothing registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from config.cross_key import rke2_line_warnings
from tests.config.refusal import FD, Run, refused


def domain(config: dict[str, Any], index: int) -> dict[str, Any]:
    return config[FD][index]  # type: ignore[no-any-return]


CASES: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    (
        "a misspelt key is refused with the nearest valid key",
        lambda c: domain(c, 0).update({"vmid": domain(c, 0).pop("vmId")}),
        ["gpu-pool:failureDomains[dc1].vmid: unknown key 'vmid'; did you mean 'vmId'?"],
    ),
    (
        "an unknown top-level key is refused with the nearest valid key",
        lambda c: c.update({"gpu-pool:failureDomain": c[FD]}),
        ["gpu-pool:failureDomain: unknown config key; did you mean 'gpu-pool:failureDomains'?"],
    ),
    (
        "a domain name that is not a DNS label",
        lambda c: domain(c, 1).update({"name": "DC_2"}),
        ["gpu-pool:failureDomains[1].name: must be a DNS label", "(got 'DC_2')"],
    ),
    (
        "duplicate domain names",
        lambda c: domain(c, 2).update({"name": "dc1"}),
        ["gpu-pool:failureDomains[2].name: 'dc1' is already used by failureDomains[0]"],
    ),
    (
        "a hostname that is not a DNS-1123 name",
        lambda c: domain(c, 0).update({"hostname": "Worker_1"}),
        ["gpu-pool:failureDomains[dc1].hostname: must be a DNS-1123 name"],
    ),
    (
        "duplicate hostnames",
        lambda c: domain(c, 1).update({"hostname": "rke2-worker-dc1-gpu-a"}),
        ["gpu-pool:failureDomains[dc2].hostname: 'rke2-worker-dc1-gpu-a' is already used by failureDomains[dc1]"],
    ),
    (
        "duplicate VM ids",
        lambda c: domain(c, 2).update({"vmId": 4101}),
        ["gpu-pool:failureDomains[dc3].vmId: 4101 is already used by failureDomains[dc1]"],
    ),
    (
        "a VM id below Proxmox's range",
        lambda c: domain(c, 0).update({"vmId": 99}),
        ["gpu-pool:failureDomains[dc1].vmId: Input should be greater than or equal to 100", "(got 99)"],
    ),
    (
        "two GPU domains on one Proxmox host",
        lambda c: domain(c, 1).update({"proxmoxNode": "pve-dc1"}),
        ["gpu-pool:failureDomains[dc2].proxmoxNode: 'pve-dc1' is already used by failureDomains[dc1]", "physical host"],
    ),
    (
        "a PCI address in the wrong form",
        lambda c: domain(c, 1)["gpu"].update({"pciAddress": "01:00.0"}),
        [
            "gpu-pool:failureDomains[dc2].gpu.pciAddress: is lspci's short form; Proxmox wants the PCI domain too: "
            "'0000:01:00.0'"
        ],
    ),
    (
        "a vendor:device id in the wrong form",
        lambda c: domain(c, 0)["gpu"].update({"vendorDeviceId": "10de-25b0"}),
        ["gpu-pool:failureDomains[dc1].gpu.vendorDeviceId: is not a vendor:device id; expected vvvv:dddd"],
    ),
    (
        "a card that is not NVIDIA's",
        lambda c: domain(c, 0)["gpu"].update({"vendorDeviceId": "1002:73bf"}),
        ["gpu-pool:failureDomains[dc1].gpu.vendorDeviceId: is not an NVIDIA device"],
    ),
    (
        "a sharing profile that does not exist",
        lambda c: domain(c, 2).update({"sharing": "a1000-x8"}),
        ["gpu-pool:failureDomains[dc3].sharing: 'a1000-x8' is not a defined sharing profile", "a1000-x4, whole"],
    ),
    (
        "replicas above 64",
        lambda c: c["gpu-pool:sharingProfiles"]["a1000-x4"].update({"replicas": 65}),
        ["gpu-pool:sharingProfiles.a1000-x4.replicas: Input should be less than or equal to 64"],
    ),
    (
        "replicas that are not an integer",
        lambda c: c["gpu-pool:sharingProfiles"]["a1000-x4"].update({"replicas": 2.5}),
        ["gpu-pool:sharingProfiles.a1000-x4.replicas: expects a whole number"],
    ),
    (
        "a sharing profile name that cannot be a node label value",
        lambda c: c["gpu-pool:sharingProfiles"].update({"a1000 x4": {"replicas": 4}}),
        ["gpu-pool:sharingProfiles.a1000 x4: the profile name is also the value of the node label"],
    ),
    (
        "a GPU resource the device plugin does not advertise",
        lambda c: c.update({"gpu-pool:kyverno": {"gpuResource": "nvidia.com/mig-1g.10gb"}}),
        ["gpu-pool:kyverno.gpuResource: 'nvidia.com/mig-1g.10gb' is not what the device plugin advertises"],
    ),
    (
        "zero cores",
        lambda c: domain(c, 0).update({"cores": 0}),
        ["gpu-pool:failureDomains[dc1].cores: is 0: a VM needs at least 1 vCPU"],
    ),
    (
        "too little memory for the driver build",
        lambda c: domain(c, 0).update({"memoryMiB": 4096}),
        ["gpu-pool:failureDomains[dc1].memoryMiB: Input should be greater than or equal to 8192"],
    ),
    (
        "too small a disk for the GPU images",
        lambda c: domain(c, 0).update({"diskGiB": 20}),
        ["gpu-pool:failureDomains[dc1].diskGiB: Input should be greater than or equal to 40"],
    ),
    (
        "UEFI Secure Boot without module signing",
        lambda c: domain(c, 0).update({"firmware": "ovmf", "secureBoot": True}),
        ["gpu-pool:failureDomains[dc1]: UEFI Secure Boot refuses the unsigned NVIDIA kernel module"],
    ),
    (
        "a large-BAR card whose host CPU address width is not given",
        lambda c: domain(c, 0).update({"firmware": "ovmf", "gpu": {**domain(c, 0)["gpu"], "barMiB": 262144 + 48}}),
        [
            "gpu-pool:failureDomains[dc1]: the cards' BARs need a 512 GiB 64-bit MMIO window (gpu 512 GiB)",
            "set hostAddressBits to what `grep -m1 'address sizes' /proc/cpuinfo` prints on pve-dc1",
        ],
    ),
    (
        "a large-BAR card under OVMF on a 39-bit host, whose 64 GiB window cannot map it",
        lambda c: domain(c, 0).update(
            {"firmware": "ovmf", "hostAddressBits": 39, "gpu": {**domain(c, 0)["gpu"], "barMiB": 262144 + 48}}
        ),
        [
            "gpu-pool:failureDomains[dc1]: the cards' BARs need a 512 GiB 64-bit MMIO window (gpu 512 GiB), but ovmf "
            "on a 39-bit host has 64 GiB",
        ],
    ),
    (
        "a raw PCI id with an API token",
        lambda c: domain(c, 0)["gpu"].update({"passthrough": "raw"}),
        ["gpu-pool:failureDomains[dc1].gpu.passthrough: 'raw' assigns a raw PCI id", "root@pam"],
    ),
    (
        "an RKE2 channel instead of a pinned version",
        lambda c: c["gpu-pool:rke2"].update({"version": "latest"}),
        ["gpu-pool:rke2.version: 'latest' is a channel, not a version"],
    ),
    (
        "an RKE2 line that never shipped containerd 2.0",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.30.14+rke2r4"}),
        ["gpu-pool:rke2.version: no RKE2 v1.30 release ships containerd 2.0", "pin v1.31.6+rke2r1 or later"],
    ),
    (
        "an RKE2 v1.31 release before containerd 2.0",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.31.5+rke2r1"}),
        [
            "gpu-pool:rke2.version: ships containerd 1.7",
            "the first release on the v1.31 line with containerd 2.0 is v1.31.6+rke2r1",
        ],
    ),
    (
        "an RKE2 v1.32 release before containerd 2.0",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.32.1+rke2r1"}),
        ["gpu-pool:rke2.version: ships containerd 1.7", "is v1.32.2+rke2r1"],
    ),
    (
        "an RKE2 server URL without the supervisor port",
        lambda c: c["gpu-pool:rke2"].update({"serverUrl": "https://rke2.lab.internal:6443"}),
        ["gpu-pool:rke2.serverUrl: must name port 9345"],
    ),
    (
        "a Proxmox endpoint over plain http",
        lambda c: c["gpu-pool:proxmox"].update({"endpoint": "http://pve:8006"}),
        ["gpu-pool:proxmox.endpoint: must be an https:// URL"],
    ),
    (
        "a Proxmox SSH port out of range",
        lambda c: c["gpu-pool:proxmox"]["ssh"].update({"port": 70000}),
        ["gpu-pool:proxmox.ssh.port: Input should be less than or equal to 65535"],
    ),
    (
        "a non-22 SSH port for a node the provider would find on its own",
        lambda c: c["gpu-pool:proxmox"]["ssh"].update({"port": 2222, "nodeAddresses": {"pve-dc1": "10.10.21.5"}}),
        [
            "gpu-pool:failureDomains[dc2].proxmoxNode: gpu-pool:proxmox.ssh.port is 2222, but node 'pve-dc2' has "
            "no address in gpu-pool:proxmox.ssh.nodeAddresses",
            "add `pve-dc2: <its address>` there",
        ],
    ),
    (
        "a missing required key",
        lambda c: c["gpu-pool:proxmox"].pop("cloudImage"),
        ["gpu-pool:proxmox.cloudImage: is required but not set"],
    ),
    (
        "a section given as a plain value instead of a map",
        lambda c: c.update({"gpu-pool:proxmox": "https://pve:8006"}),
        ["gpu-pool:proxmox: expects a map of keys (got 'https://pve:8006')"],
    ),
    (
        "no failure domains",
        lambda c: c.update({FD: []}),
        ["gpu-pool:failureDomains: is empty: list at least one failure domain"],
    ),
]


@pytest.mark.parametrize(("mistake", "break_config", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_config_is_refused_with_a_message_naming_the_key(
    mistake: str,
    break_config: Callable[[dict[str, Any]], None],
    expected: list[str],
    run_stack_program: Run,
    prod_config: dict[str, Any],
    monitor: Any,
) -> None:
    break_config(prod_config)
    message = refused(run_stack_program, prod_config, monitor)
    for fragment in expected:
        assert fragment in message, f"{mistake}: {fragment!r} not in {message!r}"


def test_every_mistake_is_reported_at_once_not_one_per_run(run_stack_program: Run, prod_config, monitor):
    domain(prod_config, 0).update({"cores": 0})
    domain(prod_config, 1)["gpu"].update({"pciAddress": "bad"})
    message = refused(run_stack_program, prod_config, monitor)
    assert "failureDomains[dc1].cores" in message and "failureDomains[dc2].gpu.pciAddress" in message


def test_a_missing_secret_says_the_exact_command_to_set_it(monitor: Any, prod_config: dict[str, Any]) -> None:
    from offline.runner import run_main, set_config, to_engine_config

    engine, secret_keys = to_engine_config(prod_config, {})
    del engine["gpu-pool:rke2Token"]
    set_config(engine, [k for k in secret_keys if k != "gpu-pool:rke2Token"])
    with pytest.raises(pulumi.RunError) as raised:
        run_main()
    assert "run: pulumi config set --secret gpu-pool:rke2Token <value>" in str(raised.value)
    assert monitor.recording.registrations == []


def test_secure_boot_is_accepted_once_module_signing_is_declared(run_stack_program: Run, prod_config):
    domain(prod_config, 0).update({"firmware": "ovmf", "secureBoot": True, "moduleSigning": True})
    vm = run_stack_program(prod_config).named("dc1-vm").inputs
    assert vm["bios"] == "ovmf" and vm["efiDisk"]["preEnrolledKeys"] is True


def test_the_articles_driver_on_the_articles_chart_is_refused_with_the_supported_r570(
    run_stack_program: Run, prod_config, monitor
):
    prod_config["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "570.133.20"})
    with pytest.raises(pulumi.RunError) as raised:
        run_stack_program(prod_config)
    assert "gpu-pool:gpuOperator" in str(raised.value) and "570.211.01" in str(raised.value)
    assert monitor.recording.registrations == []


@pytest.mark.parametrize("version", ["v1.31.6+rke2r1", "v1.32.2+rke2r1", "v1.33.0+rke2r1", "v1.34.1+rke2r1"])
def test_every_rke2_release_with_containerd_2_is_accepted(run_stack_program: Run, prod_config, version: str):
    prod_config["gpu-pool:rke2"]["version"] = version
    assert run_stack_program(prod_config).named("dc1-vm")


@pytest.mark.parametrize("version", ["v1.36.4+rke2r1", "v1.36.0+rke2r1", "v1.35.7+rke2r1"])
def test_rke2_on_a_line_gpu_pool_knows_is_accepted_without_a_word(version: str) -> None:
    assert rke2_line_warnings(version) == []


def test_rke2_v1_37_is_accepted_and_said_to_be_newer_than_any_line_gpu_pool_and_the_operator_know() -> None:
    (warning,) = rke2_line_warnings("v1.37.0+rke2r1")

    assert warning.startswith("gpu-pool:rke2.version: v1.37.0+rke2r1 is on a line newer than any gpu-pool knows")
    assert "containerd v2.2.3 in v1.36.0+rke2r1 to v2.3.4 in v1.36.4+rke2r1" in warning
    assert "RKE2 1.33 to 1.36 the GPU Operator 26.7 line is tested on" in warning


@pytest.mark.parametrize("version", ["v1.33.14+rke2r1", "v1.33.13+rke2r3", "v1.36.5+rke2r1"])
def test_an_rke2_patch_newer_than_the_newest_known_on_its_line_warns_how_to_tell_a_new_release_from_a_typo(
    version: str,
) -> None:
    [warning] = rke2_line_warnings(version)

    assert warning.startswith(f"gpu-pool:rke2.version: {version} is newer than the newest v1.3")
    assert "https://github.com/rancher/rke2/releases/tag/" in warning and "it is a typo" in warning


@pytest.mark.parametrize("version", ["v1.33.13+rke2r2", "v1.33.5+rke2r1", "v1.34.1+rke2r1"])
def test_an_rke2_release_known_on_its_line_is_not_warned_about(version: str) -> None:
    assert rke2_line_warnings(version) == []
