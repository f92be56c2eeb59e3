"""Can the pinned driver drive every card? A card its branch or kernel-module flavour cannot drive passes every
other check and then leaves the driver pod crash-looping on the node (`No NVIDIA GPU found` / `RmInitAdapter
failed`) after a 30-minute wait in `up`: refused here, with the pin or the module type that works. The facts come
from the one card capability table (knowledge/gpu_cards.py)."""

from __future__ import annotations

from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from knowledge.cuda import MINIMUM_BRANCH_FOR_CUDA_MAJOR, cuda_major_of_image
from knowledge.driver_matrix import nearest_supported, supported_drivers
from knowledge.gpu_cards import OPEN_MODULES_FROM, CardFacts, card_facts, driver_listing


def _branch(driver_version: str) -> int:
    return int(driver_version.split(".")[0])


def _listed_pin(chart_version: str, vendor_device_id: str) -> str | None:
    """The newest driver the chart supports that lists the card (or that the table cannot rule out)."""
    for driver in supported_drivers(chart_version) or ():
        if driver_listing(vendor_device_id, driver).verdict in ("listed", "unknown"):
            return driver
    return None


def _listing_problem(key: str, what: str, facts: CardFacts, card_id: str, operator: GpuOperatorConfig) -> str | None:
    """A Turing or newer card the pinned driver's branch does not list yet (or ever)."""
    if facts.architecture.open_modules == "never":
        return None  # pre-Turing: the branch rules below decide
    listing = driver_listing(card_id, operator.driver_version)
    if listing.verdict in ("listed", "unknown"):
        return None
    pin = _listed_pin(operator.chart_version, card_id)
    fix = f"set driverVersion to {pin}" if pin else f"no driver chart {operator.chart_version} supports lists it"
    if listing.verdict == "later":
        why = f"R{_branch(operator.driver_version)} lists it only from {listing.first} on"
    else:
        first = f" (the first driver that does is {listing.first})" if listing.first else ""
        why = f"no R{_branch(operator.driver_version)} driver lists it{first}"
    return (
        f"{key}: {what}, and gpu-pool:gpuOperator.driverVersion {operator.driver_version} cannot drive it: {why} "
        "(NVIDIA's supported-GPU list, open-gpu-kernel-modules README): " + fix
    )


def card_driver_problems(where: str, domain: FailureDomainConfig, operator: GpuOperatorConfig | None) -> list[str]:
    if operator is None:
        return []
    problems: list[str] = []
    branch = _branch(operator.driver_version)
    flavours: dict[str, str] = {}
    for index, card in enumerate(domain.cards):
        key = f"{where}.{domain.card_key(index)}.vendorDeviceId"
        facts = card_facts(card.vendor_device_id)
        what = f"{card.vendor_device_id} ({card.model}) is {facts.described}"
        if facts.open_modules != "optional":
            flavours.setdefault(facts.open_modules, f"{domain.card_key(index)} ({facts.architecture.name})")
        last = facts.architecture.last_branch
        if last is not None and branch > last:
            oldest = min((_branch(d) for d in supported_drivers(operator.chart_version) or ()), default=None)
            if oldest is not None and last < oldest:
                problems.append(
                    f"{key}: {what}, last supported by driver branch R{last}, older than any driver "
                    f"chart {operator.chart_version} supports (R{oldest} and newer): pass a Turing or newer card"
                )
                continue
            pin = nearest_supported(operator.chart_version, str(last)) or f"a {last} driver"
            problems.append(
                f"{key}: {what}, and R{last} is the last driver branch that supports it, but "
                f"gpu-pool:gpuOperator.driverVersion {operator.driver_version} is R{branch}: set driverVersion to "
                f"{pin}, or pass a Turing or newer card"
            )
        elif listing := _listing_problem(key, what, facts, card.vendor_device_id, operator):
            problems.append(listing)
        if operator.kernel_module_type == "open" and facts.open_modules == "never":
            problems.append(
                f"{key}: {what}, and the open kernel modules drive only {OPEN_MODULES_FROM} or newer cards "
                "(gpu-pool:gpuOperator.kernelModuleType is open): set kernelModuleType to proprietary (or auto)"
            )
        if operator.kernel_module_type == "proprietary" and facts.open_modules == "only":
            problems.append(
                f"{key}: {what}, which only the open kernel modules drive (NVIDIA: the proprietary driver is "
                "unsupported on Blackwell and Grace Hopper), but gpu-pool:gpuOperator.kernelModuleType is "
                "proprietary: set kernelModuleType to open (or auto, which picks open for it)"
            )
    if {"never", "only"} <= set(flavours):
        problems.append(
            f"{where}.gpus: {flavours['only']} needs the open kernel modules and {flavours['never']} the proprietary "
            "ones, and one VM loads one driver: put the two cards in different failure domains"
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
