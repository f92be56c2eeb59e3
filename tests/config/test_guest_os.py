"""The VM's Ubuntu release (`proxmox.guestOs`): taken from the cloud image's file name where it says one, required
where it does not, and a cloud image of another distribution refused, since cloud-init's user data, the kernel
holds and the GPU Operator's driver images all assume Ubuntu."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from components.stack_check import validate_stack
from config.errors import ConfigError
from config.proxmox import ProxmoxConfig, guest_os_of
from config.stack_file import read_stack_file

ENDPOINT = "https://pve.lab:8006/"


def _proxmox(image: str, **more: str) -> ProxmoxConfig:
    return ProxmoxConfig.model_validate({"endpoint": ENDPOINT, "cloudImage": f"local:import/{image}", **more})


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("noble-server-cloudimg-amd64.qcow2", "ubuntu-24.04"),
        ("jammy-server-cloudimg-amd64.qcow2", "ubuntu-22.04"),
        ("ubuntu-24.04-server-cloudimg-amd64.qcow2", "ubuntu-24.04"),
    ],
)
def test_the_release_comes_from_the_cloud_images_name(image: str, release: str) -> None:
    assert _proxmox(image).guest_os == release


def test_a_name_that_says_no_release_needs_guest_os_and_takes_it() -> None:
    with pytest.raises(ValidationError, match="names no Ubuntu release: set guestOs"):
        _proxmox("golden-gpu.qcow2")

    assert _proxmox("golden-gpu.qcow2", guestOs="ubuntu-24.04").guest_os == "ubuntu-24.04"


@pytest.mark.parametrize("image", ["debian-12-genericcloud-amd64.qcow2", "Rocky-9-GenericCloud.latest.x86_64.qcow2"])
def test_a_cloud_image_of_another_distribution_is_refused_saying_what_assumes_ubuntu(image: str) -> None:
    with pytest.raises(ValidationError, match="assume Ubuntu"):
        _proxmox(image)


def test_an_ubuntu_release_the_driver_images_do_not_cover_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"is Ubuntu 20\.04, which the GPU Operator's driver images do not cover"):
        _proxmox("ubuntu-20.04-server-cloudimg-amd64.qcow2")
    with pytest.raises(ValidationError, match="guestOs"):
        _proxmox("golden.qcow2", guestOs="ubuntu-20.04")


def test_the_name_is_read_not_the_datastore() -> None:
    assert guest_os_of("noble-store:import/jammy.qcow2") == "ubuntu-22.04"


@pytest.mark.parametrize(
    ("image", "kernel", "refused"),
    [
        ("noble-server-cloudimg-amd64.qcow2", "5.15.0-130-generic", True),
        ("noble-server-cloudimg-amd64.qcow2", "6.8.0-60-generic", False),
        ("noble-server-cloudimg-amd64.qcow2", "6.11.0-29-generic", False),
        ("jammy-server-cloudimg-amd64.qcow2", "6.11.0-29-generic", True),
        ("jammy-server-cloudimg-amd64.qcow2", "6.8.0-60-generic", False),
        ("jammy-server-cloudimg-amd64.qcow2", "5.15.0-130-generic", False),
    ],
)
def test_a_kernel_pin_is_judged_by_the_lines_the_guest_releases_archive_serves(
    image: str, kernel: str, refused: bool
) -> None:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw["proxmox"]["cloudImage"] = f"local:import/{image}"
    raw["failureDomains"][0]["kernel"] = kernel

    try:
        validate_stack(raw)
        problems: list[str] = []
    except ConfigError as error:
        problems = error.messages
    said = [p for p in problems if p.startswith("gpu-pool:failureDomains[") and ".kernel:" in p and "archive" in p]

    assert bool(said) == refused, problems
