"""docs/air-gap.md works as written: each stack-file block it shows, laid over the prod stack, is a stack the
preview accepts and renders as the page says, and its one command sets a `registryAuth` value the preview accepts."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import user_data_document
from components.stack_check import validate_stack
from config.secrets import BY_KEY
from offline.runner import PROJECT, read_stack_file

PAGE = Path(__file__).resolve().parent.parent / "docs" / "air-gap.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.DOTALL | re.MULTILINE)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
TOKEN = "K10" + "0" * 64 + "::server:test"


def _blocks() -> list[dict[str, Any]]:
    blocks = [yaml.safe_load(text)["config"] for text in YAML_BLOCK.findall(PAGE.read_text(encoding="utf-8"))]
    assert len(blocks) == 5, "docs/air-gap.md: a stack-file block was added or removed; this test reads each"
    return blocks


def _over_prod(block: dict[str, Any]) -> dict[str, Any]:
    """The block's keys over prod's, maps merged one level deep (a block shows only the keys it is about)."""
    raw = {k.removeprefix(f"{PROJECT}:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    for key, value in block.items():
        name = key.removeprefix(f"{PROJECT}:")
        raw[name] = {**raw[name], **value} if isinstance(value, dict) and isinstance(raw.get(name), dict) else value
    return raw


@pytest.mark.parametrize("index", range(5))
def test_each_stack_file_block_of_the_page_is_accepted_and_rendered_into_the_first_boot(index: int) -> None:
    block = _blocks()[index]
    stack = validate_stack(_over_prod(block))
    domain = stack.failure_domains[0]
    document = user_data_document(
        domain, stack.rke2, TOKEN, proxy=stack.proxy, mirrors=stack.registry_mirrors, apt_mirror=stack.apt_mirror
    )
    text = yaml.safe_dump(document)
    # Every URL the block names reaches the VM's first boot (the proxy, the mirrors, the installer).
    urls = re.findall(r"https?://[^\s'\"\]},]+", yaml.safe_dump(block))
    assert urls and all(url in text for url in urls), [url for url in urls if url not in text]


def test_the_pages_registry_auth_command_sets_a_value_the_preview_accepts() -> None:
    [command] = [
        line for block in BASH_BLOCK.findall(PAGE.read_text(encoding="utf-8")) for line in [block.replace("\\\n", "")]
    ]
    prefix = "pulumi config set --secret gpu-pool:registryAuth "
    assert command.strip().startswith(prefix)
    # The value as the shell passes it (one single-quoted word).
    value = command.strip().removeprefix(prefix).strip()
    assert value.startswith("'") and value.endswith("'") and value.count("'") == 2
    assert BY_KEY["registryAuth"].shape(value[1:-1]) is None
