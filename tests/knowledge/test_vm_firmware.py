"""The large-BAR rule: what window a card's BARs need, and which firmware the stack accepts for them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from config.failure_domain import FailureDomainConfig
from knowledge.vm_firmware import OVMF_CLASSIC_MMIO64_MIB, mmio64_window_mib

# The lent H200's BARs as the VM saw them: 16 MiB + 256 GiB + 32 MiB (tests/fixtures/node_check/h200).
H200_BAR_MIB = 16 + 256 * 1024 + 32
# An RTX A1000 without resizable BAR: 16 MiB + 256 MiB + 32 MiB.
A1000_BAR_MIB = 16 + 256 + 32


def domain(firmware: str, bar_mib: int | None) -> dict[str, Any]:
    gpu: dict[str, Any] = {"pciAddress": "0000:01:00", "vendorDeviceId": "10de:2335", "model": "NVIDIA H200",
                           "iommuGroup": 14, "subsystemId": "10de:18bf"}  # fmt: skip
    if bar_mib is not None:
        gpu["barMiB"] = bar_mib
    return {"name": "dc1", "proxmoxNode": "pve-dc1", "vmId": 301, "hostname": "rke2-worker-dc1-gpu-a",
            "gpu": gpu, "sharing": "whole", "firmware": firmware}  # fmt: skip


def test_the_h200s_bars_need_a_512_gib_window_and_the_a1000s_fit_in_512_mib() -> None:
    assert mmio64_window_mib(H200_BAR_MIB) == 512 * 1024
    assert mmio64_window_mib(A1000_BAR_MIB) == 512
    assert mmio64_window_mib(OVMF_CLASSIC_MMIO64_MIB) == OVMF_CLASSIC_MMIO64_MIB


@pytest.mark.parametrize(("firmware", "bar_mib"), [("seabios", H200_BAR_MIB), ("ovmf", A1000_BAR_MIB), ("ovmf", None)])
def test_cards_the_firmware_can_map_are_accepted(firmware: str, bar_mib: int | None) -> None:
    FailureDomainConfig.model_validate(domain(firmware, bar_mib))


def test_the_h200_under_ovmf_is_refused_with_seabios_as_the_fix() -> None:
    with pytest.raises(ValidationError) as raised:
        FailureDomainConfig.model_validate(domain("ovmf", H200_BAR_MIB))

    assert "needs a 512 GiB 64-bit MMIO window" in str(raised.value)
    assert "use firmware: seabios" in str(raised.value)
