"""The card capability table, checked against facts its sources state outright (pci.ids names, the open modules'
README tables, NVIDIA's kernel-module and MIG guides); the generated data itself is checked against the sources in
tests/contract/test_nvidia_cards_contract.py."""

from __future__ import annotations

import pytest

from knowledge.gpu_cards import DriverListing, card_facts, driver_listing, newest_branch_read


@pytest.mark.parametrize(
    ("card", "function", "chip", "architecture", "open_modules", "mig"),
    [
        # pci.ids: 2335 "GH100 [H200 SXM 141GB]"; MIG User Guide lists H200.
        ("10de:2335", "gpu", "GH100", "Hopper", "optional", True),
        # pci.ids: 2b85 "GB202 [GeForce RTX 5090]"; Blackwell takes the open modules only (NVIDIA blog, 2024-07-17).
        ("10de:2b85", "gpu", "GB202", "Blackwell", "only", False),
        # pci.ids: 22e8 "GB202 High Definition Audio Controller": the card's .1 function.
        ("10de:22e8", "audio", "GB202", "Blackwell", "only", False),
        # pci.ids: 2684 "AD102 [GeForce RTX 4090]".
        ("10de:2684", "gpu", "AD102", "Ada Lovelace", "optional", False),
        # pci.ids: 1db4 "GV100GL [Tesla V100 PCIe 16GB]": proprietary modules only (Driver Installation Guide).
        ("10de:1db4", "gpu", "GV100GL", "Volta", "never", False),
        # pci.ids: 20b0 "GA100 [A100 SXM4 40GB]", MIG capable.
        ("10de:20b0", "gpu", "GA100", "Ampere", "optional", True),
        # pci.ids: 2342 "GH100 [GH200 120GB / 480GB]": Grace Hopper, open modules only.
        ("10de:2342", "gpu", "GH100", "Hopper", "only", True),
        # pci.ids: 22a3 "GH100 [H100 NVSwitch]".
        ("10de:22a3", "nvswitch", "GH100", "Hopper", "optional", False),
    ],
)
def test_the_table_says_what_its_sources_say(
    card: str, function: str, chip: str, architecture: str, open_modules: str, mig: bool
) -> None:
    facts = card_facts(card)
    assert (facts.function, facts.chip, facts.architecture.name, facts.open_modules, facts.mig) == (
        function,
        chip,
        architecture,
        open_modules,
        mig,
    )


def test_an_id_absent_from_pci_ids_gets_the_modules_its_range_takes() -> None:
    # Below the first Blackwell id the old boundaries hold; at or above it, an id pci.ids does not name is a chip
    # newer than the table, and post-Hopper chips take the open modules only (FIELD-REVIEW-5 H3).
    facts = card_facts("10de:3fff")
    assert facts.function == "unknown"
    assert facts.architecture.open_modules == "only"
    assert card_facts("10de:28ff").function == "unknown"
    assert card_facts("10de:28ff").architecture.open_modules == "optional"
    assert card_facts("10de:2902").function == "unknown"
    assert card_facts("10de:2902").architecture.open_modules == "only"
    assert card_facts("10de:1d00").architecture.open_modules == "never"


@pytest.mark.parametrize("card", ["10de:3000", "10de:30c0"])
def test_a_chip_whose_prefix_the_table_does_not_know_takes_the_open_modules_only(card: str) -> None:
    # pci.ids: 3000 "GR100", 30c0 "GR102": named, but GR is no architecture of the table (FIELD-REVIEW-5 H3).
    facts = card_facts(card)
    assert facts.chip is not None and facts.chip.startswith("GR")
    assert facts.open_modules == "only"
    assert facts.architecture.last_branch is None


def test_only_the_measured_bar_is_known() -> None:
    assert card_facts("10de:2335").measured_bar_mib == 16 + 256 * 1024 + 32
    assert card_facts("10de:2b85").measured_bar_mib is None


@pytest.mark.parametrize(
    ("card", "driver", "listing"),
    [
        # The RTX 5090 first appears in 570.86.16's README; 550 and 535 (a maintenance branch whose newest release
        # read came out later) never list it.
        ("10de:2b85", "570", DriverListing("listed", "570.86.16")),
        ("10de:2b85", "570.86.16", DriverListing("listed", "570.86.16")),
        ("10de:2b85", "570.86.10", DriverListing("later", "570.86.16")),
        ("10de:2b85", "550.163.01", DriverListing("never", "570.86.16")),
        ("10de:2b85", "535.999.99", DriverListing("never", "570.86.16")),
        # The H200 is listed from 550.40.65 on.
        ("10de:2335", "550.54.15", DriverListing("listed", "550.40.65")),
        ("10de:2335", "535.288.01", DriverListing("never", "550.40.65")),
        # A branch newer than the table: unknown, never a refusal.
        ("10de:2335", "999.1.2", DriverListing("unknown")),
    ],
)
def test_which_driver_releases_list_a_card(card: str, driver: str, listing: DriverListing) -> None:
    assert driver_listing(card, driver) == listing


def test_the_table_read_current_branches() -> None:
    assert int(newest_branch_read()) >= 580
