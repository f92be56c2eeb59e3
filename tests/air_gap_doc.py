"""docs/air-gap.md's stack-file blocks, as the tests run them: each block's keys laid over the prod stack."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from components.gpu_failure_domain.cloud_init import user_data_document
from config.stack import StackConfig
from offline.runner import PROJECT, read_stack_file

PAGE = Path(__file__).resolve().parent.parent / "docs" / "air-gap.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.DOTALL | re.MULTILINE)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[dict[str, Any]]:
    """Every `config:` block of the page, in order."""
    return [yaml.safe_load(text)["config"] for text in YAML_BLOCK.findall(PAGE.read_text(encoding="utf-8"))]


def no_route_out_block() -> dict[str, Any]:
    """The page's block for a lab with no route out (the one with `airGapped`)."""
    [block] = [block for block in blocks() if f"{PROJECT}:airGapped" in block]
    return block


def over_prod(block: dict[str, Any]) -> dict[str, Any]:
    """The block's keys over prod's, maps merged one level deep (a block shows only the keys it is about)."""
    raw = {k.removeprefix(f"{PROJECT}:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    for key, value in block.items():
        name = key.removeprefix(f"{PROJECT}:")
        raw[name] = {**raw[name], **value} if isinstance(value, dict) and isinstance(raw.get(name), dict) else value
    return raw


def first_boot_document(stack: StackConfig, token: str, registry_auth: str | None = None) -> dict[str, Any]:
    """The first domain's cloud-config as the program renders it for the stack, every egress key passed."""
    return user_data_document(
        stack.failure_domains[0],
        stack.rke2,
        token,
        proxy=stack.proxy,
        mirrors=stack.mirrors,
        registry_auth=registry_auth,
        apt_mirror=stack.apt_mirror,
        trusted_ca=stack.trusted_ca,
    )
