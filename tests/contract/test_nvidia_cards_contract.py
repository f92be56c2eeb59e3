"""knowledge/data/nvidia_cards.json is what tests/contract/write_nvidia_cards.py generates from the two public
sources it names; with the sources' clones in GPU_POOL_PCI_IDS and GPU_POOL_OPEN_GPU_KERNEL_MODULES this
regenerates it and compares (without them, the spot checks in tests/knowledge/test_gpu_cards.py still run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knowledge.gpu_cards import DATA_FILE
from tests.contract.write_nvidia_cards import OPEN_MODULES_ENV, PCI_IDS_ENV, render


@pytest.mark.skipif(
    not (os.environ.get(PCI_IDS_ENV) and os.environ.get(OPEN_MODULES_ENV)),
    reason=f"set {PCI_IDS_ENV} and {OPEN_MODULES_ENV} to clones of pciutils/pciids and NVIDIA/open-gpu-kernel-modules",
)
def test_the_committed_card_table_is_what_the_sources_generate() -> None:
    pci_ids, modules = Path(os.environ[PCI_IDS_ENV]), Path(os.environ[OPEN_MODULES_ENV])
    assert DATA_FILE.read_text(encoding="utf-8") == render(pci_ids, modules), (
        "knowledge/data/nvidia_cards.json is stale: run the command in tests/contract/write_nvidia_cards.py"
    )
