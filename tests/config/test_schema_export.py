"""The stack file's JSON Schema and the config reference: current, complete, and as strict as the program."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from config.schema_export import _models, generated_files, stack_file_schema
from tests.plugin_recording import valid_stack_files

ROOT = Path(__file__).resolve().parents[2]
STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))
VALID_STACK_FILES = valid_stack_files()
SCHEMA_LINE = "# yaml-language-server: $schema=./docs/stack-config.schema.json"


@pytest.mark.parametrize("name", sorted(generated_files()))
def test_the_committed_docs_are_what_the_config_models_generate_now(name: str) -> None:
    committed = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert committed == generated_files()[name], f"docs/{name} is out of date: run `make docs`"


def test_every_config_key_is_documented() -> None:
    missing = [
        f"{model}.{field}"
        for model, cls in _models().items()
        for field, info in cls.model_fields.items()
        if not info.description
    ]
    assert missing == []


@pytest.mark.parametrize("path", STACK_FILES, ids=[p.name for p in STACK_FILES])
def test_every_stack_file_points_editors_at_the_schema(path: Path) -> None:
    assert path.read_text(encoding="utf-8").splitlines()[0] == SCHEMA_LINE


def _validator() -> jsonschema.Draft202012Validator:
    schema = stack_file_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _with_secret(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["config"]["gpu-pool:rke2Token"] = {"secure": "v1:ciphertext"}
    return document


@pytest.mark.parametrize("path", VALID_STACK_FILES, ids=[str(p.relative_to(ROOT)) for p in VALID_STACK_FILES])
def test_every_shipped_stack_file_is_valid_against_the_schema_as_shipped_without_secrets(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert [error.message for error in _validator().iter_errors(document)] == []


@pytest.mark.parametrize("path", VALID_STACK_FILES, ids=[str(p.relative_to(ROOT)) for p in VALID_STACK_FILES])
def test_every_shipped_stack_file_stays_valid_once_its_secrets_are_set(path: Path) -> None:
    assert [error.message for error in _validator().iter_errors(_with_secret(path))] == []


def _prod_with_first_domain(change: Any) -> dict[str, Any]:
    document = _with_secret(ROOT / "Pulumi.prod.yaml")
    change(document["config"]["gpu-pool:failureDomains"][0])
    return document


def test_an_editor_flags_a_domain_that_names_its_cards_both_ways() -> None:
    document = _prod_with_first_domain(lambda domain: domain.update(gpus=[domain["gpu"]]))
    messages = [error.message for error in _validator().iter_errors(document)]
    assert any("is valid under each of" in message for message in messages), messages


def test_an_editor_flags_a_domain_without_a_card() -> None:
    document = _prod_with_first_domain(lambda domain: domain.pop("gpu"))
    messages = [error.message for error in _validator().iter_errors(document)]
    assert any("is not valid under any of the given schemas" in message for message in messages), messages


def test_an_editor_flags_a_wrong_pci_address_in_a_list_of_cards() -> None:
    document = _prod_with_first_domain(lambda domain: domain.update(gpus=[{**domain.pop("gpu"), "pciAddress": "1:0"}]))
    messages = [error.message for error in _validator().iter_errors(document)]
    assert any("does not match" in message for message in messages), messages


MISTAKES: list[tuple[str, str, Any, str]] = [
    ("a misspelt key", "gpu-pool:proxmox", {"endpont": "x"}, "'endpont' was unexpected"),
    ("a value outside the enum", "gpu-pool:proxmox", {"auth": "password"}, "'password' is not one of"),
    (
        "a PCI address in the wrong form",
        "gpu-pool:failureDomains",
        [{"gpu": {"pciAddress": "01:00.0"}}],
        "does not match",
    ),
    ("a plain-text secret", "gpu-pool:rke2Token", "K10abc", "is not of type 'object'"),
    (
        "an unknown gpu-pool key",
        "gpu-pool:failureDomain",
        [],
        "'gpu-pool:failureDomain' does not match any of the regexes",
    ),
]


@pytest.mark.parametrize(("mistake", "key", "value", "expected"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_an_editor_flags_what_the_program_would_refuse(mistake: str, key: str, value: Any, expected: str) -> None:
    document = _with_secret(ROOT / "Pulumi.prod.yaml")
    config = document["config"]
    if isinstance(value, dict) and isinstance(config.get(key), dict):
        config[key] = {**copy.deepcopy(config[key]), **value}
    elif isinstance(value, list) and value and key in config:
        config[key][0]["gpu"].update(value[0]["gpu"])
    else:
        config[key] = value
    messages = [error.message for error in _validator().iter_errors(document)]
    assert any(expected in message for message in messages), (mistake, messages)


def test_other_namespaces_pass_through_as_pulumi_passes_them_to_their_providers() -> None:
    document = _with_secret(ROOT / "Pulumi.prod.yaml")
    document["config"]["proxmoxve:minTls"] = "1.3"
    document["config"]["pulumi:tags"] = {"team": "ml"}
    assert [error.message for error in _validator().iter_errors(document)] == []


def test_the_schema_file_is_plain_json_an_editor_can_fetch() -> None:
    assert json.loads((ROOT / "docs" / "stack-config.schema.json").read_text())["$schema"].endswith("2020-12/schema")
