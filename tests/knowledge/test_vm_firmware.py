"""The large-BAR rule: what window cards' BARs need, what each firmware has on a host of a given CPU address width
(edk2's and SeaBIOS's own arithmetic, knowledge/vm_firmware.py), and which domains the stack accepts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from config.failure_domain import FailureDomainConfig
from knowledge.vm_firmware import (
    OVMF_CLASSIC_MMIO64_MIB,
    mmio64_window_mib,
    ovmf_aperture_mib,
    seabios_aperture_mib,
    windows_mib,
)

# The lent H200's BARs as the VM saw them: 16 MiB + 256 GiB + 32 MiB (tests/fixtures/node_check/h200).
H200_BAR_MIB = 16 + 256 * 1024 + 32
# An RTX A1000 without resizable BAR: 16 MiB + 256 MiB + 32 MiB.
A1000_BAR_MIB = 16 + 256 + 32
# A 32 GB card with resizable BAR on (BAR1 as large as its memory): 16 MiB + 32 GiB + 32 MiB.
REBAR_32G_MIB = 16 + 32 * 1024 + 32
GIB = 1024


def card(index: int, bar_mib: int | None, device: str = "10de:2204") -> dict[str, Any]:
    gpu: dict[str, Any] = {"pciAddress": f"0000:0{index + 1}:00", "vendorDeviceId": device, "model": "card",
                           "iommuGroup": 14 + index, "subsystemId": "10de:0000"}  # fmt: skip
    if bar_mib is not None:
        gpu["barMiB"] = bar_mib
    return gpu


def domain(firmware: str, bars: list[int | None], bits: int | None = None, device: str = "10de:2204") -> dict[str, Any]:
    data: dict[str, Any] = {"name": "dc1", "proxmoxNode": "pve-dc1", "vmId": 301, "hostname": "rke2-worker-dc1-gpu-a",
                            "sharing": "whole", "firmware": firmware, "memoryMiB": 65536}  # fmt: skip
    data["gpus"] = [card(i, bar, device) for i, bar in enumerate(bars)]
    if bits is not None:
        data["hostAddressBits"] = bits
    return data


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        FailureDomainConfig.model_validate(data)
    return str(raised.value)


def test_the_h200s_bars_need_a_512_gib_window_and_the_a1000s_fit_in_512_mib() -> None:
    assert mmio64_window_mib(H200_BAR_MIB) == 512 * GIB
    assert mmio64_window_mib(A1000_BAR_MIB) == 512
    assert mmio64_window_mib(OVMF_CLASSIC_MMIO64_MIB) == OVMF_CLASSIC_MMIO64_MIB


def test_several_cards_windows_add_up_each_at_least_a_gib() -> None:
    assert windows_mib([REBAR_32G_MIB, REBAR_32G_MIB]) == 128 * GIB
    assert windows_mib([A1000_BAR_MIB, A1000_BAR_MIB]) == 2 * GIB


@pytest.mark.parametrize(
    ("bits", "aperture_gib"),
    [(None, 32), (36, 32), (37, 32), (39, 64), (40, 128), (41, 256), (46, 8192), (52, 8192)],
    ids=[
        "unknown",
        "36 bits: 8 GiB, so the classic",
        "37 bits: not trusted",
        "39 (Intel)",
        "40 (AMD)",
        "41",
        "46",
        "52: capped at 46 with 4-level paging",
    ],
)
def test_ovmf_sizes_its_window_from_the_guests_address_width_as_edk2_does(bits: int | None, aperture_gib: int) -> None:
    assert ovmf_aperture_mib(bits) == aperture_gib * GIB


def test_seabios_places_its_window_below_the_width_capped_at_44_bits_and_above_ram() -> None:
    assert seabios_aperture_mib(39, 16384) == 512 * GIB - (4 * GIB + 14 * GIB)
    assert seabios_aperture_mib(48, 16384) == 16 * 1024 * GIB - 18 * GIB


def test_cards_within_32_gib_need_no_address_width_under_either_firmware() -> None:
    for firmware in ("seabios", "ovmf"):
        FailureDomainConfig.model_validate(domain(firmware, [A1000_BAR_MIB, A1000_BAR_MIB]))
        FailureDomainConfig.model_validate(domain(firmware, [None]))


@pytest.mark.parametrize("firmware", ["seabios", "ovmf"])
def test_the_h200_on_a_46_bit_host_is_accepted_under_either_firmware(firmware: str) -> None:
    FailureDomainConfig.model_validate(domain(firmware, [H200_BAR_MIB], bits=46))


def test_the_h200s_measured_bars_count_although_the_stack_gives_none() -> None:
    message = refusal(domain("ovmf", [None], device="10de:2335"))

    assert "need a 512 GiB 64-bit MMIO window (gpus[0] 512 GiB)" in message
    assert "set hostAddressBits" in message


def test_two_cards_that_each_fit_the_window_but_not_together_are_refused_naming_both() -> None:
    message = refusal(domain("ovmf", [REBAR_32G_MIB, REBAR_32G_MIB], bits=39))

    assert "need a 128 GiB 64-bit MMIO window (gpus[0] 64 GiB + gpus[1] 64 GiB)" in message
    assert "ovmf on a 39-bit host has 64 GiB" in message
    assert "use firmware: seabios, which has" in message


def test_a_large_bar_card_without_the_hosts_address_width_is_refused_with_the_command_that_prints_it() -> None:
    message = refusal(domain("seabios", [H200_BAR_MIB]))

    assert "set hostAddressBits to what `grep -m1 'address sizes' /proc/cpuinfo` prints on pve-dc1" in message


def test_the_h200_on_a_39_bit_host_fits_no_firmware_and_says_so() -> None:
    message = refusal(domain("seabios", [H200_BAR_MIB], bits=39))

    assert "seabios on a 39-bit host has" in message
    assert "put these cards on a host with a wider CPU address width" in message
