"""How a stack file is written, judged as the Pulumi CLI reads it: a key outside `config:` or a misspelt `config:`
reaches nobody and is refused with where it belongs; YAML merge keys are expanded as the CLI's YAML (yaml.v3) does;
one of this project's keys under another project's prefix is named; turning the chart's NFD off is said to need
the cluster's own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from components.stack_check import validate_stack
from config.cross_key import config_warnings
from config.errors import ConfigError
from config.stack_file import StackFileError, read_stack_file
from config.stack_yaml import load_stack_yaml
from offline.runner import ROOT_DIR
from tests.config.refusal import Run, refused

MINIMAL = (ROOT_DIR / "Pulumi.minimal.yaml").read_text(encoding="utf-8")


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_a_misspelt_config_section_is_refused_with_the_key_it_meant(tmp_path: Path) -> None:
    with pytest.raises(StackFileError, match=r"`conifg` is not a key of a stack file.*did you mean `config:`\?"):
        read_stack_file("lab", _write(tmp_path, MINIMAL.replace("\nconfig:\n", "\nconifg:\n")))


def test_a_project_key_outside_config_is_refused_saying_to_indent_it(tmp_path: Path) -> None:
    text = MINIMAL + "gpu-pool:preflight:\n  hostCheck: true\n"

    with pytest.raises(StackFileError) as caught:
        read_stack_file("lab", _write(tmp_path, text))

    assert "`gpu-pool:preflight` is outside `config:`" in str(caught.value)
    assert "indent it under config:" in str(caught.value)


def test_the_stack_files_own_keys_are_taken(tmp_path: Path) -> None:
    text = "secretsprovider: passphrase\nencryptionsalt: v1:abc\nenvironment:\n  - lab\n" + MINIMAL
    assert "gpu-pool:rke2" in read_stack_file("lab", _write(tmp_path, text))


def test_merge_keys_are_expanded_as_the_clis_yaml_does_the_mapping_own_keys_winning() -> None:
    text = (
        "a: &a {sharing: whole, cores: 4}\n"
        "b: &b {cores: 16, memoryMiB: 8192}\n"
        "one:\n  <<: *a\n  cores: 8\n"
        "both:\n  <<: [*a, *b]\n"
    )

    loaded = load_stack_yaml(text, "t")

    assert loaded["one"] == {"sharing": "whole", "cores": 8}
    assert loaded["both"] == {"sharing": "whole", "cores": 4, "memoryMiB": 8192}


def test_a_domain_written_with_a_merge_key_is_judged_as_the_expanded_one(tmp_path: Path) -> None:
    text = MINIMAL.replace("    - name: host-a\n", "    - &first\n      name: host-a\n", 1).replace(
        "    - name: host-b\n", "    - <<: *first\n      name: host-b\n", 1
    )
    # host-b keeps its own keys; what it does not set comes from host-a: memoryMiB, and gpus beside its own gpu.
    config = read_stack_file("lab", _write(tmp_path, text))
    domains = config["gpu-pool:failureDomains"]
    assert domains[1]["name"] == "host-b" and domains[1]["memoryMiB"] == 24576

    with pytest.raises(ConfigError) as caught:
        validate_stack({k.removeprefix("gpu-pool:"): v for k, v in config.items()})

    assert caught.value.messages == [
        "gpu-pool:failureDomains[host-b]: gives both gpu and gpus: keep one (gpus: [...] lists every card, gpu is "
        "one card)"
    ]


def test_a_merge_key_with_a_scalar_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    text = MINIMAL.replace("      sharing: whole\n", "      <<: whole\n", 1)

    with pytest.raises(StackFileError, match="a merge key `<<` takes a map or a list of maps"):
        read_stack_file("lab", _write(tmp_path, text))


def test_a_project_key_under_another_projects_prefix_is_named(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    prod_config["homelab:smokeTest"] = {"enabled": False}

    message = refused(run_stack_program, prod_config, monitor)

    assert "homelab:smokeTest: smokeTest is a key of this project (gpu-pool), under the prefix of another" in message
    assert "write it as gpu-pool:smokeTest" in message


def test_the_providers_own_prefixes_are_left_to_them(run_stack_program: Run, prod_config: dict[str, Any]) -> None:
    prod_config["kubernetes:kubernetes"] = "x"  # the provider's key space: not this project's to judge

    assert run_stack_program(prod_config).registrations


def test_turning_the_charts_nfd_off_warns_that_the_clusters_own_must_label_and_tolerate() -> None:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("minimal").items()}
    raw["gpuOperator"]["extraValues"] = {"nfd": {"enabled": False}}

    [warning] = [w for w in config_warnings(validate_stack(raw)) if "nfd" in w]

    assert warning.startswith("gpu-pool:gpuOperator.extraValues.nfd.enabled: false: the chart deploys no Node")
    assert "feature.node.kubernetes.io/pci-10de.present=true" in warning
    assert "tolerate their taint (nvidia.com/gpu=true:NoSchedule)" in warning
