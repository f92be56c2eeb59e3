"""Can the pinned driver drive every card? A card its branch or kernel-module flavour cannot drive passes
every other check and then leaves the driver pod crash-looping on the node (`No NVIDIA GPU found` / `RmInitAdapter
failed`) after a 30-minute wait in `up`: refused here, with the pin or the module type that works."""

from __future__ import annotations

from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from knowledge.cuda import MINIMUM_BRANCH_FOR_CUDA_MAJOR, cuda_major_of_image
from knowledge.driver_matrix import nearest_supported, supported_drivers
from knowledge.gpu_architectures import OPEN_MODULES_FROM, generation


def _branch(driver_version: str) -> int:
    return int(driver_version.split(".")[0])


def card_driver_problems(where: str, domain: FailureDomainConfig, operator: GpuOperatorConfig | None) -> list[str]:
    if operator is None:
        return []
    problems: list[str] = []
    branch = _branch(operator.driver_version)
    for index, card in enumerate(domain.cards):
        key = f"{where}.{domain.card_key(index)}.vendorDeviceId"
        gen = generation(card.vendor_device_id)
        what = f"{card.vendor_device_id} ({card.model}) is a {gen.name} card"
        if gen.last_branch is not None and branch > gen.last_branch:
            oldest = min((_branch(d) for d in supported_drivers(operator.chart_version) or ()), default=None)
            if oldest is not None and gen.last_branch < oldest:
                problems.append(
                    f"{key}: {what}, last supported by driver branch R{gen.last_branch}, older than any driver "
                    f"chart {operator.chart_version} supports (R{oldest} and newer): pass a Turing or newer card"
                )
                continue
            pin = nearest_supported(operator.chart_version, str(gen.last_branch)) or f"a {gen.last_branch} driver"
            problems.append(
                f"{key}: {what}, and R{gen.last_branch} is the last driver branch that supports it, but "
                f"gpu-pool:gpuOperator.driverVersion {operator.driver_version} is R{branch}: set driverVersion to "
                f"{pin}, or pass a Turing or newer card"
            )
        if operator.kernel_module_type == "open" and not gen.open_modules:
            problems.append(
                f"{key}: {what}, and the open kernel modules drive only {OPEN_MODULES_FROM} or newer cards "
                "(gpu-pool:gpuOperator.kernelModuleType is open): set kernelModuleType to proprietary (or auto)"
            )
    return problems


def smoke_image_problems(image: str | None, operator: GpuOperatorConfig | None) -> list[str]:
    """The smoke test's CUDA must run on the pinned driver, or the last step of `up` fails on every node with
    'CUDA driver version is insufficient for CUDA runtime version' although the GPU chain is fine."""
    if image is None or operator is None:
        return []
    major = cuda_major_of_image(image)
    needs = MINIMUM_BRANCH_FOR_CUDA_MAJOR.get(major) if major is not None else None
    branch = _branch(operator.driver_version)
    if needs is None or branch >= needs:
        return []
    return [
        f"gpu-pool:smokeTest.image: {image} is built with CUDA {major}, which needs a driver from R{needs}, but "
        f"gpu-pool:gpuOperator.driverVersion {operator.driver_version} is R{branch}: use an image built with CUDA "
        f"{max(m for m, b in MINIMUM_BRANCH_FOR_CUDA_MAJOR.items() if b <= branch)} (the default "
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04), or pin a newer driver"
    ]
