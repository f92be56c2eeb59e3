"""Inputs that pass every single-key check and would only fail on the node, 30 minutes into `up`: a card the
pinned driver cannot drive, a containerd socket RKE2 does not use. Each is refused at preview naming the key and
the fix, and nothing is registered."""

from __future__ import annotations

from typing import Any

import pytest

from config.card_driver import card_driver_problems, smoke_image_problems
from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from knowledge.cuda import cuda_major_of_image
from knowledge.gpu_cards import card_facts
from tests.config.refusal import FD, Run, refused

V100 = {"vendorDeviceId": "10de:1db1", "model": "Tesla V100-SXM2-16GB"}
P4 = {"vendorDeviceId": "10de:1bb3", "model": "Tesla P4"}
K80 = {"vendorDeviceId": "10de:102d", "model": "Tesla K80"}


def _card(prod_config: dict[str, Any], index: int, **changes: Any) -> None:
    prod_config[FD][index]["gpu"].update(changes)


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("10de:102d", "Kepler"),
        ("10de:13bb", "Maxwell"),
        ("10de:1bb3", "Pascal"),
        ("10de:1db1", "Volta"),
        ("10de:1e02", "Turing"),
        ("10de:2331", "Hopper"),
        ("10de:25b0", "Ampere"),
        ("10de:2805", "Ada Lovelace"),
        ("10de:2b85", "Blackwell"),
        ("10de:3fff", "Blackwell or newer"),
        ("10de:2902", "Blackwell or newer"),
        ("10de:28ff", "Turing or newer"),
        ("10de:3000", "post-Blackwell GR"),
    ],
    ids=[
        "K80",
        "Quadro K620 is Maxwell",
        "P4",
        "V100",
        "TITAN RTX",
        "H100 PCIe",
        "RTX A1000",
        "RTX 4060 Ti",
        "RTX 5090",
        "an id newer than the table",
        "an unnamed id right above the first Blackwell",
        "an unnamed id right below the first Blackwell",
        "pci.ids GR100, a prefix the table does not know",
    ],
)
def test_a_cards_architecture_follows_from_its_pci_device_id(device: str, name: str) -> None:
    assert card_facts(device).architecture.name == name


def test_a_volta_card_under_a_driver_newer_than_r580_is_refused_with_the_580_pin(
    run_stack_program: Run, prod_config, monitor
):
    _card(prod_config, 1, **V100)
    prod_config["gpu-pool:gpuOperator"].update(chartVersion="v26.7.0", driverVersion="595.91.07")

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc2].gpu.vendorDeviceId: 10de:1db1 (Tesla V100-SXM2-16GB) is a Volta card (GV100GL)" in message
    assert "R580 is the last driver branch that supports it" in message
    assert "driverVersion 595.91.07 is R595: set driverVersion to 580.173.02" in message


@pytest.mark.parametrize("driver", ["580.173.02", "570.211.01"])
def test_a_pascal_card_under_r580_or_older_with_auto_modules_is_accepted(prod_config, driver: str) -> None:
    _card(prod_config, 0, **P4)
    domain = FailureDomainConfig.model_validate(prod_config[FD][0])
    operator = GpuOperatorConfig.model_validate({"chartVersion": "v26.3.2", "driverVersion": driver})

    assert card_driver_problems(f"{FD}[dc1]", domain, operator) == []


@pytest.mark.parametrize("device", ["10de:3000", "10de:30c0", "10de:3fff"], ids=["GR100", "GR102", "unnamed"])
def test_a_post_blackwell_card_under_the_proprietary_modules_is_refused(prod_config, device: str) -> None:
    # FIELD-REVIEW-5 H3: a chip newer than the table used to be classed "Turing or newer, optional modules", so
    # kernelModuleType: proprietary was accepted for a card the proprietary flavour cannot drive.
    _card(prod_config, 0, vendorDeviceId=device, model="a future card")
    domain = FailureDomainConfig.model_validate(prod_config[FD][0])
    operator = GpuOperatorConfig.model_validate(
        {"chartVersion": "v26.7.0", "driverVersion": "595.91.07", "kernelModuleType": "proprietary"}
    )

    problems = card_driver_problems(f"{FD}[dc1]", domain, operator)

    assert any("only the open kernel modules drive" in p and "set kernelModuleType to open" in p for p in problems)


def test_a_pre_turing_card_under_the_open_kernel_modules_is_refused_with_proprietary_as_the_fix(
    run_stack_program: Run, prod_config, monitor
):
    _card(prod_config, 2, **P4)
    prod_config["gpu-pool:gpuOperator"]["kernelModuleType"] = "open"

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc3].gpu.vendorDeviceId: 10de:1bb3 (Tesla P4) is a Pascal card (GP104GL)" in message
    assert "open kernel modules drive only Turing or newer" in message
    assert "set kernelModuleType to proprietary (or auto)" in message


def test_a_kepler_card_is_refused_because_no_driver_the_chart_supports_drives_it(
    run_stack_program: Run, prod_config, monitor
):
    _card(prod_config, 0, **K80)
    chart = prod_config["gpu-pool:gpuOperator"]["chartVersion"]

    message = refused(run_stack_program, prod_config, monitor)

    assert "is a Kepler card (GK210GL), last supported by driver branch R470" in message
    assert f"chart {chart} supports (R535 and newer): pass a Turing or newer card" in message


def test_every_card_of_a_several_card_domain_is_checked(run_stack_program: Run, prod_config, monitor):
    first = dict(prod_config[FD][0].pop("gpu"))
    second = {**first, "pciAddress": "0000:02:00", "iommuGroup": 15, **V100}
    prod_config[FD][0]["gpus"] = [first, second]
    prod_config["gpu-pool:gpuOperator"]["kernelModuleType"] = "open"

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].gpus[1].vendorDeviceId: 10de:1db1" in message
    assert f"{FD}[dc1].gpus[0]" not in message


@pytest.mark.parametrize(
    ("image", "major"),
    [
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04", 12),
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda13.0.0-ubuntu24.04", 13),
        ("docker.io/nvidia/cuda:11.8.0-base-ubuntu22.04", 11),
        ("registry.lab/team/vector-add:1.4", None),
    ],
)
def test_the_cuda_major_of_an_nvidia_image_is_read_from_its_tag(image: str, major: int | None) -> None:
    assert cuda_major_of_image(image) == major


def test_a_cuda_13_smoke_image_under_an_r570_driver_is_refused_with_a_cuda_12_image_as_the_fix(
    run_stack_program: Run, prod_config, monitor
):
    image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda13.0.0-ubuntu24.04"
    prod_config["gpu-pool:smokeTest"] = {"image": image}
    prod_config["gpu-pool:gpuOperator"].update(chartVersion="v26.3.2", driverVersion="570.211.01")

    message = refused(run_stack_program, prod_config, monitor)

    assert f"gpu-pool:smokeTest.image: {image} is built with CUDA 13, which needs a driver from R580" in message
    assert "driverVersion 570.211.01 is R570: use an image built with CUDA 12" in message


def test_a_cuda_13_smoke_image_under_r580_is_accepted(prod_config) -> None:
    operator = GpuOperatorConfig.model_validate({"driverVersion": "580.173.02"})

    assert smoke_image_problems("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda13.0.0-ubuntu24.04", operator) == []
