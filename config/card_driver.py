"""Can the pinned driver drive every card? A card its branch or kernel-module flavour cannot drive passes
every other check and then leaves the driver pod crash-looping on the node (`No NVIDIA GPU found` / `RmInitAdapter
failed`) after a 30-minute wait in `up`: refused here, with the pin or the module type that works."""

from __future__ import annotations

from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
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
