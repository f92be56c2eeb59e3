"""docs/air-gap.md works as written: each stack-file block it shows, laid over the prod stack, is a stack the
preview accepts and renders as the page says, and each of its commands sets a `registryAuth` value the preview
accepts. (The no-route-out block is booted for real in tests/gpu_failure_domain/test_first_boot.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components.stack_check import validate_stack
from config.secrets import BY_KEY
from tests.air_gap_doc import BASH_BLOCK, PAGE, blocks, first_boot_document, over_prod
from tests.lab_ca import make_lab_ca

TOKEN = "K10" + "0" * 64 + "::server:test"
BLOCKS = 7
# The keys whose URLs the nodes' first boot does not fetch (the chart is Helm's, where `pulumi up` runs).
NOT_THE_FIRST_BOOTS = ("gpu-pool:gpuOperator",)


def test_the_page_has_the_blocks_this_test_reads() -> None:
    assert len(blocks()) == BLOCKS, "docs/air-gap.md: a stack-file block was added or removed; this test reads each"


@pytest.mark.parametrize("index", range(BLOCKS))
def test_each_stack_file_block_of_the_page_is_accepted_and_rendered_into_the_first_boot(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = blocks()[index]
    # A block's trustedCa names a file relative to the project: here a CA made for the test.
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "lab-ca.crt").write_text(make_lab_ca(tmp_path / "ca").pem)
    monkeypatch.chdir(tmp_path)
    stack = validate_stack(over_prod(block))
    document = first_boot_document(stack, TOKEN)
    text = yaml.safe_dump(document)
    # Every URL the block names reaches the VM's first boot (the proxy, the mirrors, the installer).
    shown = {key: value for key, value in block.items() if key not in NOT_THE_FIRST_BOOTS}
    urls = re.findall(r"https?://[^\s'\"\]},]+", yaml.safe_dump(shown))
    assert all(url in text for url in urls), [url for url in urls if url not in text]
    if "gpu-pool:trustedCa" in block:
        assert document["ca_certs"]["trusted"] == [stack.trusted_ca]


def _commands() -> list[str]:
    return [block.replace("\\\n", "").strip() for block in BASH_BLOCK.findall(PAGE.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("command", _commands())
def test_each_registry_auth_command_of_the_page_sets_a_value_the_preview_accepts(command: str) -> None:
    prefix = "pulumi config set --secret gpu-pool:registryAuth "
    assert command.startswith(prefix)
    # The value as the shell passes it (one single-quoted word).
    value = command.removeprefix(prefix).strip()
    assert value.startswith("'") and value.endswith("'") and value.count("'") == 2
    assert BY_KEY["registryAuth"].shape(value[1:-1]) is None
