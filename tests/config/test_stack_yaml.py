"""Stack files read as the Pulumi CLI reads them (gopkg.in/yaml.v3): YAML 1.2 scalars, a key given twice refused."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.stack_yaml import DuplicateKeyError, load_stack_yaml
from offline.runner import ROOT_DIR, StackFileError, read_stack_file

# (what a user writes, what PyYAML 1.1 makes of it, what yaml.v3 decodes into an interface{})
TRAPS: list[tuple[str, Any, Any]] = [
    ("41:00.0", 2460.0, "41:00.0"),  # sexagesimal float in 1.1: 41*60 + 0.0
    ("1:30", 90, "1:30"),  # sexagesimal int in 1.1
    ("on", True, "on"),
    ("off", False, "off"),
    ("yes", True, "yes"),
    ("no", False, "no"),
    ("y", "y", "y"),
    ("NO", False, "NO"),
    ("0x10", 16, 16),
    ("0o17", "0o17", 15),  # 1.2 octal: a string in 1.1
    ("010", 8, 8),  # leading zero: octal in both (yaml.v3 keeps 1.1 octals)
    ("09", "09", 9.0),  # not octal: Go's ParseInt fails, the float pattern matches
    ("0b101", 5, 5),
    ("1_000", 1000, 1000),
    ("1e3", "1e3", 1000.0),  # 1.1 wants a dot in a float
    (".5", 0.5, 0.5),
    ("true", True, True),
    ("True", True, True),
    ("~", None, None),
    ("null", None, None),
    ("2025-01-31", "date", "2025-01-31"),  # a date object in 1.1; the CLI's config keeps the text
    ("10de:25b0", "10de:25b0", "10de:25b0"),
    ("v1.33.5+rke2r1", "v1.33.5+rke2r1", "v1.33.5+rke2r1"),
]


@pytest.mark.parametrize(("text", "pyyaml", "pulumi"), TRAPS, ids=[t[0] for t in TRAPS])
def test_a_plain_scalar_reads_as_the_pulumi_cli_reads_it_not_as_yaml_1_1(text: str, pyyaml: Any, pulumi: Any) -> None:
    ours = load_stack_yaml(f"value: {text}\n", "t.yaml")["value"]
    assert ours == pulumi and type(ours) is type(pulumi)
    theirs = yaml.safe_load(f"value: {text}\n")["value"]
    if pyyaml == "date":
        assert not isinstance(theirs, str), "PyYAML makes a date of it: the trap this reader avoids"
    else:
        assert theirs == pyyaml, "the table's YAML 1.1 column is what PyYAML really does"


def test_quoted_scalars_stay_strings() -> None:
    document = load_stack_yaml("a: '0x10'\nb: \"on\"\nc: '41:00.0'\n", "t.yaml")
    assert document == {"a": "0x10", "b": "on", "c": "41:00.0"}


def test_special_floats_read_as_yaml_v3_reads_them() -> None:
    document = load_stack_yaml("a: .inf\nb: -.Inf\nc: .NaN\n", "t.yaml")
    assert document["a"] == math.inf and document["b"] == -math.inf and math.isnan(document["c"])


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines() -> None:
    text = "config:\n  gpu-pool:kyverno:\n    enabled: true\n  gpu-pool:rke2: {}\n"
    text += "  gpu-pool:kyverno:\n    enabled: false\n"
    with pytest.raises(DuplicateKeyError) as raised:
        load_stack_yaml(text, "Pulumi.lab.yaml")
    assert str(raised.value).startswith(
        "Pulumi.lab.yaml: key 'gpu-pool:kyverno' is given twice, on line 2 and on line 5; the Pulumi CLI refuses"
    )


def test_a_key_given_twice_deep_inside_a_list_is_refused_too() -> None:
    text = "config:\n  gpu-pool:failureDomains:\n    - name: dc1\n      vmId: 1\n      vmId: 2\n"
    with pytest.raises(DuplicateKeyError, match=r"key 'vmId' is given twice, on line 4 and on line 5"):
        load_stack_yaml(text, "Pulumi.lab.yaml")


SHIPPED = sorted([*ROOT_DIR.glob("Pulumi.*.yaml"), *ROOT_DIR.glob("examples/*/Pulumi.*.yaml")])


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT_DIR)) for p in SHIPPED])
def test_both_readers_agree_on_every_shipped_stack_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert load_stack_yaml(text, path.name) == yaml.safe_load(text)


def _stack_dir(tmp_path: Path, text: str) -> Path:
    (tmp_path / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_the_stack_reader_refuses_a_duplicate_key_with_one_message(tmp_path: Path) -> None:
    folder = _stack_dir(tmp_path, "config:\n  gpu-pool:kyverno: {}\n  gpu-pool:kyverno: {enabled: false}\n")
    with pytest.raises(StackFileError, match=r"key 'gpu-pool:kyverno' is given twice, on line 2 and on line 3"):
        read_stack_file("lab", folder)


def test_the_stack_reader_refuses_a_file_that_is_not_a_map(tmp_path: Path) -> None:
    with pytest.raises(StackFileError, match=r"must be a map with a `config:` key"):
        read_stack_file("lab", _stack_dir(tmp_path, "- a\n- b\n"))


def test_an_lspci_address_unquoted_reaches_the_check_as_text_and_the_fix_shows_the_right_form(tmp_path: Path) -> None:
    text = (
        (ROOT_DIR / "Pulumi.prod.yaml")
        .read_text(encoding="utf-8")
        .replace('pciAddress: "0000:01:00"', "pciAddress: 41:00.0", 1)
    )
    assert "pciAddress: 41:00.0" in text
    folder = _stack_dir(tmp_path, text)
    result = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "lab", "--stack-dir", str(folder),
         "--out", str(tmp_path / "o")],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "gpu.pciAddress: is lspci's short form; Proxmox wants the PCI domain too: '0000:41:00.0'" in result.stderr
    assert "2460" not in result.stderr and "2460.0" not in result.stderr and "Traceback" not in result.stderr


def test_a_text_read_twice_gives_two_documents_and_a_broken_one_fails_both_times() -> None:
    """The node tree is composed once per text (a preview reads its stack file twice); what callers get and change
    is theirs alone, and a YAML error is raised every time, not remembered as a result."""
    text = "config:\n  gpu-pool:a:\n    b: [1, 2]\n"
    first = load_stack_yaml(text, "t.yaml")
    first["config"]["gpu-pool:a"]["b"].append(3)

    assert load_stack_yaml(text, "t.yaml") == {"config": {"gpu-pool:a": {"b": [1, 2]}}}
    for _ in range(2):
        with pytest.raises(yaml.YAMLError):
            load_stack_yaml("config: [\n", "t.yaml")
